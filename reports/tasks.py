"""Celery tasks for the Spark reports: thin doors that take ids and call a service."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from reports.services import report_run_create, report_run_execute

# A run cancels its own Spark jobs at MQ_REPORT_TIME_LIMIT and records why; these limits,
# a little above it, stop a worker that a run holds past that all the same (never a hung
# worker).
REPORT_LIMITS = {
    "soft_time_limit": settings.MQ_REPORT_TIME_LIMIT + 120,
    "time_limit": settings.MQ_REPORT_TIME_LIMIT + 180,
}


@shared_task(name="reports.report_run", ignore_result=True, acks_late=True, **REPORT_LIMITS)
def report_run_task(run_id: int) -> None:
    report_run_execute(run_id=run_id)


@shared_task(name="reports.report_heap_daily", ignore_result=True, **REPORT_LIMITS)
def report_heap_daily_task() -> int:
    """The scheduled heap report (last 24 hours), e-mailed when done."""
    run = report_run_create(kind="heap", actor="schedule", enqueue=False)
    report_run_execute(run_id=run.id)
    return run.id
