"""Per-minute stats buckets: the counters the flush job adds to (messages/stats/flush.py,
messages/stats/row_acks.py). Writers hold the flush lock (`MaintenanceRun` job "flush")."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from messages.stats.models import StatsBucket

COUNT_FIELDS = ("produced", "succeeded", "failed", "retried", "lease_expired", "expired")
Key = tuple[str, str, datetime]


def minute_of(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0)


def no_deltas() -> dict[Key, dict[str, int]]:
    return defaultdict(lambda: dict.fromkeys(COUNT_FIELDS, 0))


def buckets_add(deltas: dict[Key, dict[str, int]]) -> None:
    """Add counts to existing buckets or create them (caller holds the flush lock)."""
    if not deltas:
        return
    minutes = {key[2] for key in deltas}
    topics = {key[0] for key in deltas}
    existing = {
        (b.topic, b.group_name, b.minute): b
        for b in StatsBucket.objects.filter(minute__in=minutes, topic__in=topics)
    }
    create, update = [], []
    for key, counts in deltas.items():
        bucket = existing.get(key)
        if bucket is None:
            create.append(StatsBucket(topic=key[0], group_name=key[1], minute=key[2], **counts))
            continue
        for field, n in counts.items():
            setattr(bucket, field, getattr(bucket, field) + n)
        update.append(bucket)
    StatsBucket.objects.bulk_create(create, batch_size=500)
    if update:
        StatsBucket.objects.bulk_update(update, COUNT_FIELDS, batch_size=500)
