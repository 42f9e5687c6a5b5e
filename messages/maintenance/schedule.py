"""The jobs Celery beat runs: what `manage.py setup_maintenance` installs, and what the
Maintenance page and `/healthz/maintenance` report on.

Each entry: (periodic task name, Celery task, job name recorded by `maintenance_run`, default
interval in seconds, what it does). The design's four maintenance jobs are flush, retry,
delay and cleanup; the others are the broker's other periodic work.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import NamedTuple


class Scheduled(NamedTuple):
    name: str
    task: str
    job: str
    seconds: int
    description: str


SCHEDULES: tuple[Scheduled, ...] = (
    Scheduled("mq maintenance: flush", "messages.maintenance.flush", "flush", 15,
              "stats buckets and backlog snapshots"),
    Scheduled("mq maintenance: retry", "messages.maintenance.retry", "retry", 2,
              "expired leases back to NEW (after the retry delay) or TIMEOUT"),
    Scheduled("mq maintenance: delay", "messages.maintenance.delay", "delay", 2,
              "wake the pulls of groups whose delayed, retried or snoozed messages came due"),
    Scheduled("mq maintenance: expire", "messages.maintenance.expire", "expire", 15,
              "undelivered messages past expires_at to EXPIRED"),
    Scheduled("mq maintenance: cleanup", "messages.maintenance.cleanup", "cleanup", 3600,
              "archive, Parquet export, purge, registry prune"),
    Scheduled("mq maintenance: alarms", "messages.maintenance.alarms", "alarms", 60,
              "backlog / age / dead-letter alarms by e-mail"),
    Scheduled("mq transactions: check-back", "messages.transactions.check", "transactions", 5,
              "ask producers about open transactions"),
    Scheduled("mq alarms: webhooks", "messages.alarms.webhook", "webhooks", 5,
              "post alarms to their webhooks, retry failed posts"),
    Scheduled("mq schedules: tick", "messages.schedules.tick", "schedules", 5,
              "produce the messages of due schedules"),
    Scheduled("mq reports: daily heap", "reports.report_heap_daily", "reports", 86400,
              "Spark heap report, e-mailed"),
)
JOB_OF_TASK = {s.task: s.job for s in SCHEDULES}
# A job is stale once its next run is this much overdue (at least; a job of a longer
# interval gets one interval more).
STALE_GRACE = timedelta(minutes=5)


def job_lag(*, every: timedelta, last_ok_at: datetime | None, since: datetime | None, now: datetime) -> timedelta:
    """How far past due the job's next good run is: 0 while on time. A job that never ran
    well counts from `since` (when it was scheduled)."""
    start = last_ok_at or since or now
    return max(timedelta(0), now - (start + every))


def is_stale(lag: timedelta, every: timedelta) -> bool:
    return lag > max(STALE_GRACE, every)
