"""The retry and delay jobs.

retry: expired leases come back (NEW with the retry policy's delay, or TIMEOUT when no
retries remain) even when no consumer pulls and no broker process runs its sweep. Nothing
else is needed for "due retry policies": a scheduled retry is already a NEW message with a
future effect_time, delivered by the normal claim once due (and woken by the delay job).

delay: long-polls sleep until their group's next known effect_time, but a pull that began
before a delayed message was produced elsewhere may not know about it. The job publishes
a wake-up for every (topic, group) whose delayed messages just came due, and schedules
wake-ups (Celery tasks with an ETA) for those coming due before its next run, so a delayed
message is delivered within about a second of its effect_time. Wake-ups cross processes
only with REDIS_URL set; without it broker processes rely on their own timers.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from messages.models import Message, Status
from messages.services.delivery import leases_recover
from registry.wakeups import wakeup_hub
from topics.models import TopicGroup

RETRY_BATCH = 500
RETRY_MAX_BATCHES = 100
# The delay job runs every DELAY_INTERVAL seconds (the default beat schedule) and looks
# this far back (anything that came due since its previous run) and ahead.
DELAY_INTERVAL_SECONDS = 5
DELAY_LOOKBACK_SECONDS = 15
DELAY_LOOKAHEAD_SECONDS = 10
DELAY_PER_GROUP_LIMIT = 1000
WAKE_RESOLUTION_SECONDS = 0.2
MAX_SCHEDULED_WAKES = 500
Pair = tuple[str, str]


def maintenance_retry(*, batch: int = RETRY_BATCH, max_batches: int = RETRY_MAX_BATCHES) -> dict[str, Any]:
    """Recover expired leases in bounded batches (SKIP LOCKED: safe beside broker sweeps
    and other workers)."""
    recovered = 0
    for _ in range(max_batches):
        n = leases_recover(limit=batch)
        recovered += n
        if n < batch:
            break
    return {"recovered": recovered}


def maintenance_delay(
    *,
    now: datetime | None = None,
    schedule: Callable[[list[Pair], datetime], None] | None = None,
    lookback_seconds: float = DELAY_LOOKBACK_SECONDS,
    lookahead_seconds: float = DELAY_LOOKAHEAD_SECONDS,
) -> dict[str, Any]:
    """Wake pulls of groups whose delayed messages came due; schedule wake-ups for those
    coming due soon through `schedule(pairs, at)` (the task passes a Celery ETA task)."""
    now = now or timezone.now()
    low = now - timedelta(seconds=lookback_seconds)
    high = now + timedelta(seconds=lookahead_seconds)
    due_now: set[Pair] = set()
    upcoming: dict[datetime, set[Pair]] = defaultdict(set)
    pairs = TopicGroup.objects.filter(topic__paused=False).values_list("topic__name", "name")
    for topic, group in pairs.iterator():
        # Index-only range scan of the claim index (topic, group, status, effect_time).
        times = (
            Message.objects.filter(
                topic=topic, group_name=group, status=Status.NEW, effect_time__gt=low, effect_time__lte=high
            )
            .order_by("effect_time")
            .values_list("effect_time", flat=True)[:DELAY_PER_GROUP_LIMIT]
        )
        for moment in times:
            if moment <= now:
                due_now.add((topic, group))
            else:
                upcoming[_round_up(moment)].add((topic, group))
    if due_now:
        wakeup_hub().publish(due_now)
    scheduled = 0
    if schedule is not None:
        for at in sorted(upcoming)[:MAX_SCHEDULED_WAKES]:
            schedule(sorted(upcoming[at]), at)
            scheduled += 1
    return {"woken_groups": len(due_now), "scheduled_wakes": scheduled}


def _round_up(moment: datetime) -> datetime:
    """Collapse nearby due times into one wake-up a little after them (never before)."""
    step = int(WAKE_RESOLUTION_SECONDS * 1_000_000)
    micros = moment.second * 1_000_000 + moment.microsecond
    rounded = -(-micros // step) * step
    return moment.replace(second=0, microsecond=0) + timedelta(microseconds=rounded)


def groups_wake(*, pairs: list[Pair]) -> int:
    """Wake the pulls waiting on these (topic, group) pairs in every broker process."""
    wakeup_hub().publish([tuple(p) for p in pairs])  # type: ignore[misc]
    return len(pairs)
