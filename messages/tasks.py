"""Celery tasks for messages: thin doors that take ids and call a service."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from messages.services import bulk_job_run
from messages.services.alarm_webhooks import alarm_webhook_deliver, alarm_webhook_retry_delay
from messages.services.alarms import alarms_check
from messages.services.archive import maintenance_cleanup
from messages.services.expiry import messages_expire
from messages.services.runs import maintenance_run
from messages.services.schedules import schedules_tick
from messages.services.stats import stats_flush
from messages.services.transactions import transactions_check

# A hung job must not hold a worker forever; the next beat tick starts it again.
LIMITS = {"soft_time_limit": 540, "time_limit": 600}


@shared_task(name="messages.bulk_job", ignore_result=True, acks_late=True)
def bulk_job_task(job_id: int) -> None:
    bulk_job_run(job_id=job_id)


@shared_task(name="messages.maintenance.flush", ignore_result=True, **LIMITS)
def flush_task() -> dict[str, Any]:
    return maintenance_run(job="flush", work=stats_flush)


@shared_task(name="messages.maintenance.cleanup", ignore_result=True, **LIMITS)
def cleanup_task() -> dict[str, Any]:
    return maintenance_run(job="cleanup", work=maintenance_cleanup)


@shared_task(name="messages.maintenance.expire", ignore_result=True, **LIMITS)
def expire_task() -> dict[str, Any]:
    return maintenance_run(job="expire", work=messages_expire)


@shared_task(name="messages.maintenance.alarms", ignore_result=True, **LIMITS)
def alarms_task() -> dict[str, Any]:
    return maintenance_run(job="alarms", work=alarms_check)


# Retries are counted by alarm_webhook_deliver against MQ_ALARM_WEBHOOK_RETRIES, not by Celery.
@shared_task(name="messages.alarms.webhook", bind=True, ignore_result=True, max_retries=None,
             soft_time_limit=120, time_limit=150)
def alarm_webhook_task(self: Any, alarm_id: int, url: str, fmt: str) -> None:
    attempt = self.request.retries + 1
    if alarm_webhook_deliver(alarm_id=alarm_id, url=url, fmt=fmt, attempt=attempt) == "retrying":
        raise self.retry(countdown=alarm_webhook_retry_delay(attempt=attempt))


@shared_task(name="messages.transactions.check", ignore_result=True, **LIMITS)
def transactions_check_task() -> dict[str, Any]:
    return maintenance_run(job="transactions", work=transactions_check)


@shared_task(name="messages.schedules.tick", ignore_result=True, **LIMITS)
def schedules_tick_task() -> dict[str, Any]:
    return maintenance_run(job="schedules", work=schedules_tick)
