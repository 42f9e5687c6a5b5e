"""The `retry` and `delay` maintenance jobs, run by Celery beat (messages/maintenance/tasks.py).

- `retry` takes back expired leases (`leases_recover`): each becomes NEW, due after its
  topic's retry delay, or a TIMEOUT dead letter when no retries are left. It is the one
  trigger of lease recovery unless MQ_LEASE_RECOVERY_SECONDS asks the broker processes to
  do it on their own timer instead (then this job reports that and recovers nothing).
- `delay` wakes, through the wake-up hub (Redis pub/sub, so every broker process), the
  waiting pulls of each (topic, group) holding NEW messages that came due since its last run:
  delayed produces, retries scheduled by acks or by `retry`, snoozes. It is the one trigger
  that tells pulls of other processes about messages coming due; a pull itself only bounds
  its own wait by the next due time its claim saw.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from messages.delivery.lifecycle import leases_recover
from messages.maintenance.models import MaintenanceRun
from messages.models import PRIORITY_LEVELS, Message, Status
from registry.wakeups import wakeup_hub
from topics.models import TopicGroup

RECOVERY_BATCH = 500
RECOVERY_MAX_BATCHES = 40  # 20,000 leases a run at most: the next run takes the rest
# The first `delay` run (no watermark yet) looks back this far.
DELAY_FIRST_LOOKBACK = timedelta(minutes=5)
PROBE_CHUNK = 200
PULL_STAMP_SLACK_SECONDS = 10  # a group's last_pull_at is written at most every 5 s per process


def leases_release() -> dict[str, Any]:
    """The `retry` job: take back every expired lease, in bounded batches."""
    if settings.MQ_LEASE_RECOVERY_SECONDS > 0:
        return {"recovered": 0, "by": f"broker processes every {settings.MQ_LEASE_RECOVERY_SECONDS:g} s"}
    recovered = 0
    for _ in range(RECOVERY_MAX_BATCHES):
        batch = leases_recover(limit=RECOVERY_BATCH)
        recovered += batch
        if batch < RECOVERY_BATCH:
            break
    return {"recovered": recovered}


def due_wake(*, now: datetime | None = None) -> dict[str, Any]:
    """The `delay` job: wake the pulls of every (topic, group) whose NEW messages came due in
    (last run, now]. Only groups pulled from lately can have a pull waiting (a pull waits
    MQ_MAX_WAIT_SECONDS at most, and stamps its group's `last_pull_at` every few seconds);
    their probes go PROBE_CHUNK at a time as one query of ranges along `ix_msg_priority`
    `(topic, group_name, status, -priority, effect_time)`, one per group and priority level. The watermark (microseconds since the epoch
    in the job row's `cursor`) moves only after the wake-ups are published."""
    now = now or timezone.now()
    run, _ = MaintenanceRun.objects.get_or_create(job="delay")
    since = (datetime.fromtimestamp(run.cursor / 1_000_000, tz=UTC) if run.cursor
             else now - DELAY_FIRST_LOOKBACK)
    pulled_since = min(since, now) - timedelta(seconds=settings.MQ_MAX_WAIT_SECONDS + PULL_STAMP_SLACK_SECONDS)
    pairs = list(TopicGroup.objects.filter(topic__deleting_at__isnull=True, last_pull_at__gte=pulled_since)
                 .values_list("topic__name", "name"))
    due: set[tuple[str, str]] = set()
    for start in range(0, len(pairs), PROBE_CHUNK):
        ranges = Q()
        for topic, group in pairs[start:start + PROBE_CHUNK]:
            ranges |= Q(topic=topic, group_name=group)
        due |= set(Message.objects.filter(ranges, status=Status.NEW, priority__in=PRIORITY_LEVELS,
                                          effect_time__gt=since, effect_time__lte=now)
                   .values_list("topic", "group_name").distinct())
    wakeup_hub().publish(due)
    MaintenanceRun.objects.filter(job="delay").update(cursor=int(now.timestamp() * 1_000_000))
    return {"groups": len(pairs), "woken": len(due)}
