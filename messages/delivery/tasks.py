"""The delivery core's beat job: expire NEW messages past their expiry in bounded batches."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from messages.delivery.expiry import messages_expire
from messages.maintenance.runs import TASK_LIMITS, maintenance_run


@shared_task(name="messages.maintenance.expire", ignore_result=True, **TASK_LIMITS)
def expire_task() -> dict[str, Any]:
    return maintenance_run(job="expire", work=messages_expire)
