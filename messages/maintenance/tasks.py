"""The `retry` and `delay` jobs on beat (messages/maintenance/jobs.py)."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from messages.maintenance.jobs import due_wake, leases_release
from messages.maintenance.runs import TASK_LIMITS, maintenance_run


@shared_task(name="messages.maintenance.retry", ignore_result=True, **TASK_LIMITS)
def retry_task() -> dict[str, Any]:
    return maintenance_run(job="retry", work=leases_release)


@shared_task(name="messages.maintenance.delay", ignore_result=True, **TASK_LIMITS)
def delay_task() -> dict[str, Any]:
    return maintenance_run(job="delay", work=due_wake)
