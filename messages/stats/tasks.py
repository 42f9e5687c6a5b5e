"""The flush job on beat: stats buckets and backlog snapshots."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from messages.maintenance.runs import TASK_LIMITS, maintenance_run
from messages.stats.flush import stats_flush


@shared_task(name="messages.maintenance.flush", ignore_result=True, **TASK_LIMITS)
def flush_task() -> dict[str, Any]:
    return maintenance_run(job="flush", work=stats_flush)
