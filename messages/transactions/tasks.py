"""The check-back job on beat: ask the producers of overdue open transactions."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from messages.maintenance.runs import TASK_LIMITS, maintenance_run
from messages.transactions.services import transactions_check


@shared_task(name="messages.transactions.check", ignore_result=True, **TASK_LIMITS)
def transactions_check_task() -> dict[str, Any]:
    return maintenance_run(job="transactions", work=transactions_check)
