"""Celery tasks for the Spark reports: thin doors that take ids and call a service."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings

from messages.maintenance.runs import maintenance_run
from reports.checks import report_mail_links_check
from reports.services import report_heap_daily, report_run_execute

logger = logging.getLogger(__name__)

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
def report_heap_daily_task() -> dict[str, Any]:
    """The scheduled heap report (last 24 hours), e-mailed when done; its runs are shown
    with the maintenance jobs."""
    return maintenance_run(job="reports", work=report_heap_daily)


@worker_ready.connect
def report_worker_ready(**kwargs: Any) -> None:
    """Workers send the report e-mails, and run no Django system checks: say at their
    start-up what those checks would (relative links without MQ_ADVERTISED_URL)."""
    for message in report_mail_links_check():
        logger.warning("%s %s", message.msg, message.hint)
