"""The schedules' tick on beat: produce every due tick once."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from messages.maintenance.runs import TASK_LIMITS, maintenance_run
from messages.schedules.services import schedules_tick


@shared_task(name="messages.schedules.tick", ignore_result=True, **TASK_LIMITS)
def schedules_tick_task() -> dict[str, Any]:
    return maintenance_run(job="schedules", work=schedules_tick)
