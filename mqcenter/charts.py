"""Chart series for the console (dashboard, topic and group pages), from the stats buckets.

Ranges and their buckets: 1 h in 1-minute buckets, 24 h in 15-minute buckets, 7 d in
2-hour buckets, so every range draws 60-96 points. Counters are summed per bucket; backlog
and oldest age are the last snapshot in the bucket (the maximum age), None without one.

Series: produced; acked (succeeded); failed (became dead letters); retried (retries
scheduled, by nack or expired lease); delivered, the deliveries that ended in the bucket
(acked + failed + retried: the buckets keep no count of pulls); expired (became EXPIRED dead
letters: not delivered before their expiry). Backlog is deliverable + delayed (NEW) messages.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from messages.stats.flush import minute_of
from messages.stats.selectors import stats_series
from mqcenter.core.auth import Principal
from mqcenter.core.errors import InvalidRequest

RANGES: dict[str, tuple[timedelta, int]] = {
    "1h": (timedelta(hours=1), 1),
    "24h": (timedelta(hours=24), 15),
    "7d": (timedelta(days=7), 120),
}
COUNTERS = ("produced", "delivered", "acked", "failed", "retried", "expired")


def chart_series(
    *, principal: Principal, range_name: str, topic: str | None = None, group: str | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The series of one chart: {"range", "bucket_seconds", "t": [epoch seconds], and one
    list per counter plus "backlog" and "oldest_age_seconds"}."""
    if range_name not in RANGES:
        raise InvalidRequest("range must be one of 1h, 24h, 7d.", details={"field": "range"})
    span, bucket_minutes = RANGES[range_name]
    until = minute_of(now or timezone.now()) + timedelta(minutes=1)
    # Align buckets to whole multiples of their size so the points do not shift per minute.
    epoch_minutes = int(until.timestamp() // 60)
    until += timedelta(minutes=(-epoch_minutes) % bucket_minutes)
    since = until - span
    points = stats_series(principal=principal, topic=topic, group=group, since=since, until=until)
    out: dict[str, Any] = {"range": range_name, "bucket_seconds": bucket_minutes * 60, "t": [],
                           **{name: [] for name in COUNTERS}, "backlog": [], "oldest_age_seconds": []}
    for start in range(0, len(points), bucket_minutes):
        chunk = points[start : start + bucket_minutes]
        produced = sum(p["produced"] for p in chunk)
        acked = sum(p["succeeded"] for p in chunk)
        failed = sum(p["failed"] for p in chunk)
        retried = sum(p["retried"] for p in chunk)
        snapshots = [p for p in chunk if p["deliverable"] is not None]
        last = snapshots[-1] if snapshots else None
        out["t"].append(int(chunk[0]["minute"].timestamp()))
        out["produced"].append(produced)
        out["acked"].append(acked)
        out["failed"].append(failed)
        out["retried"].append(retried)
        out["delivered"].append(acked + failed + retried)
        out["expired"].append(sum(p["expired"] for p in chunk))
        out["backlog"].append(None if last is None else (last["deliverable"] or 0) + (last["delayed"] or 0))
        ages = [p["oldest_deliverable_age_seconds"] for p in snapshots if p["oldest_deliverable_age_seconds"] is not None]
        out["oldest_age_seconds"].append(max(ages) if ages else (None if last is None else 0))
    return out
