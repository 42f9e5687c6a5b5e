"""The cleanup job on beat: archive, purge the archive, export, prune the registry."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from messages.archive.services import maintenance_cleanup
from messages.maintenance.runs import TASK_LIMITS, maintenance_run


@shared_task(name="messages.maintenance.cleanup", ignore_result=True, **TASK_LIMITS)
def cleanup_task() -> dict[str, Any]:
    return maintenance_run(job="cleanup", work=maintenance_cleanup)
