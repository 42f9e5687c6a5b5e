"""The alarms job on beat, and the delivery of one alarm to one webhook target with retries."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from messages.alarms.services import alarms_check
from messages.alarms.webhooks import alarm_webhook_deliver, alarm_webhook_retry_delay
from messages.maintenance.runs import TASK_LIMITS, maintenance_run


@shared_task(name="messages.maintenance.alarms", ignore_result=True, **TASK_LIMITS)
def alarms_task() -> dict[str, Any]:
    return maintenance_run(job="alarms", work=alarms_check)


# Retries are counted by alarm_webhook_deliver against MQ_ALARM_WEBHOOK_RETRIES, not by Celery.
@shared_task(name="messages.alarms.webhook", bind=True, ignore_result=True, max_retries=None,
             soft_time_limit=120, time_limit=150)
def alarm_webhook_task(self: Any, alarm_id: int, url: str, fmt: str) -> None:
    attempt = self.request.retries + 1
    if alarm_webhook_deliver(alarm_id=alarm_id, url=url, fmt=fmt, attempt=attempt) == "retrying":
        raise self.retry(countdown=alarm_webhook_retry_delay(attempt=attempt))
