"""Counts for the API, the dashboard and the charts: per-(topic, group) counts by status with
rates, and per-minute series, read from the stats buckets and the claim index, never by
counting the hot table row by row."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Max, Sum
from django.utils import timezone

from messages.delivery.sql import oldest_due
from messages.models import Message, Status
from messages.stats.flush import COUNT_FIELDS, bucket_totals, minute_of
from messages.stats.models import StatsBucket
from mqcenter.core.auth import Principal
from mqcenter.core.errors import InvalidRequest
from topics.models import Topic


def topic_stats(*, principal: Principal, topic: str | None = None) -> list[dict[str, Any]]:
    """Per (topic, group): counts by status and the oldest deliverable message's age.

    The counts are one index-only GROUP BY; the oldest deliverable message of each group
    with a backlog is read along ix_msg_priority, one short range per priority level. The
    maintenance flush job keeps per-minute buckets for rates and dashboards.
    """
    now = timezone.now()
    rows = Message.objects.all()
    if topic:
        rows = rows.filter(topic=topic)
    visible_topics = None
    if principal.biz_ids is not None:
        visible_topics = set(Topic.objects.filter(biz_id__in=principal.biz_ids).values_list("name", flat=True))
    counts = rows.values("topic", "group_name", "status").annotate(n=Count("id")).order_by()
    stats: dict[tuple[str, str], dict[str, Any]] = {}
    for row in counts:
        if visible_topics is not None and row["topic"] not in visible_topics:
            continue
        entry = stats.setdefault(
            (row["topic"], row["group_name"]),
            {"topic": row["topic"], "group": row["group_name"], "counts": {s: 0 for s in Status.values},
             "oldest_deliverable_age_seconds": None},
        )
        entry["counts"][row["status"]] = row["n"]
    for (topic_name, group), entry in stats.items():
        if entry["counts"][Status.NEW]:
            oldest = oldest_due(topic_name, group, now)
            if oldest is not None:
                entry["oldest_deliverable_age_seconds"] = round((now - oldest).total_seconds(), 3)
    _add_rates(stats, now=now)
    return [stats[key] for key in sorted(stats)]


RATE_WINDOW_MINUTES = 5


def _add_rates(stats: dict[tuple[str, str], dict[str, Any]], *, now: datetime) -> None:
    """Per-minute rates over the last RATE_WINDOW_MINUTES complete minutes, from the stats
    buckets the flush job keeps (zeros until it has run)."""
    until = minute_of(now)
    since = until - timedelta(minutes=RATE_WINDOW_MINUTES)
    topics = sorted({key[0] for key in stats})
    totals = bucket_totals(topics=topics, since=since, until=until) if topics else {}
    for key, entry in stats.items():
        counts = totals.get(key, {})
        entry["rates"] = {
            f"{field}_per_minute": round(counts.get(field, 0) / RATE_WINDOW_MINUTES, 3)
            for field in COUNT_FIELDS
        }


MAX_SERIES_MINUTES = 7 * 24 * 60


def stats_series(
    *, principal: Principal, topic: str | None = None, group: str | None = None,
    since: datetime, until: datetime,
) -> list[dict[str, Any]]:
    """One row per minute in [since, until) for charts, summed over the visible topics (or
    the one `topic`) and their groups (or the one `group`).

    Counters are 0 for minutes without events. Backlog fields (deliverable, delayed,
    running, dead: sums; oldest_deliverable_age_seconds: the maximum) are None for minutes
    without a snapshot. Reads the stats buckets only, never the hot table.
    """
    since, until = minute_of(since), minute_of(until)
    if until <= since:
        return []
    if (until - since) > timedelta(minutes=MAX_SERIES_MINUTES):
        raise InvalidRequest("A series spans at most 7 days.", details={"field": "since"})
    rows = StatsBucket.objects.filter(minute__gte=since, minute__lt=until)
    if topic:
        topic_row = Topic.objects.filter(name=topic).first()
        # Another line's topic answers as a missing one: an empty series.
        hidden = not principal.may_biz(topic_row.biz_id) if topic_row is not None else principal.biz_ids is not None
        if hidden:
            return _empty_series(since, until)
        rows = rows.filter(topic=topic)
    elif principal.biz_ids is not None:
        rows = rows.filter(topic__in=Topic.objects.filter(biz_id__in=principal.biz_ids).values("name"))
    if group:
        rows = rows.filter(group_name=group)
    summed = (
        rows.values("minute")
        .annotate(
            **{f: Sum(f) for f in COUNT_FIELDS},
            deliverable=Sum("deliverable"), delayed=Sum("delayed"), running=Sum("running"),
            dead=Sum("dead"), oldest_deliverable_age_seconds=Max("oldest_deliverable_age_seconds"),
        )
        .order_by()
    )
    by_minute = {row["minute"]: row for row in summed}
    series = _empty_series(since, until)
    for point in series:
        row = by_minute.get(point["minute"])
        if row is None:
            continue
        for field in COUNT_FIELDS:
            point[field] = row[field] or 0
        for field in ("deliverable", "delayed", "running", "dead", "oldest_deliverable_age_seconds"):
            point[field] = row[field]
    return series


def _empty_series(since: datetime, until: datetime) -> list[dict[str, Any]]:
    points = []
    minute = since
    while minute < until:
        points.append({
            "minute": minute, **dict.fromkeys(COUNT_FIELDS, 0),
            "deliverable": None, "delayed": None, "running": None, "dead": None,
            "oldest_deliverable_age_seconds": None,
        })
        minute += timedelta(minutes=1)
    return points
