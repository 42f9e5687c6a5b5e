"""The alarms job on beat, and the delivery of one alarm to one webhook target with retries."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from messages.alarms.services import alarms_check
from messages.alarms.webhooks import alarm_webhooks_deliver
from messages.maintenance.runs import TASK_LIMITS, maintenance_run


@shared_task(name="messages.maintenance.alarms", ignore_result=True, **TASK_LIMITS)
def alarms_task() -> dict[str, Any]:
    return maintenance_run(job="alarms", work=alarms_check)


# On the outbound queue (MQ_OUTBOUND_QUEUE), every few seconds and after each raised alarm;
# a run lasts one post's deadline at most.
@shared_task(name="messages.alarms.webhook", ignore_result=True, soft_time_limit=120, time_limit=150)
def alarm_webhooks_task() -> dict[str, Any]:
    return maintenance_run(job="webhooks", work=alarm_webhooks_deliver)
