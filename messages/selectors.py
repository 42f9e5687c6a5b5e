"""Reads for the API and the console: search with keyset pagination, detail, stats."""

from __future__ import annotations

import base64
import binascii
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Max, Min, QuerySet, Sum
from django.utils import timezone

from messages.filters import MessageFilter
from messages.models import Message, MessageArchive, MessageTrace, StatsBucket, Status
from messages.services.operations import message_get
from messages.services.stats import COUNT_FIELDS, bucket_totals, minute_of
from messages.services.trace import row_events
from mqcenter.core.auth import Principal
from mqcenter.core.errors import InvalidRequest, NotFound
from topics.models import Topic
from topics.services import topic_is_deleting

PAGE_SIZE = 50
MAX_PAGE_SIZE = 500


def cursor_encode(last_id: int) -> str:
    return base64.urlsafe_b64encode(f"id:{last_id}".encode()).decode().rstrip("=")


def cursor_decode(cursor: str) -> int:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        kind, _, value = raw.partition(":")
        if kind != "id":
            raise ValueError(kind)
        return int(value)
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise InvalidRequest("cursor is not one this API returned.", details={"field": "cursor"}) from exc


def messages_search(
    *, principal: Principal, filter: MessageFilter, cursor: str | None = None, limit: int = PAGE_SIZE
) -> tuple[list[Message], str | None]:
    """Newest first, keyset-paginated on id: each page is one index range scan, whatever
    the table size, and there is never a COUNT."""
    return _keyset_page(filter.queryset(principal), cursor, limit)


def _keyset_page(rows: QuerySet[Any], cursor: str | None, limit: int) -> tuple[list[Any], str | None]:
    limit = max(1, min(limit, MAX_PAGE_SIZE))
    if cursor:
        rows = rows.filter(id__lt=cursor_decode(cursor))
    page = list(rows.order_by("-id")[: limit + 1])
    next_cursor = cursor_encode(page[limit - 1].id) if len(page) > limit else None
    return page[:limit], next_cursor


def message_trace(message: Message | MessageArchive) -> list[MessageTrace]:
    """The message's trace, oldest first: the events its row holds ("produced", a claim's
    pull, see `trace.row_events`) among the stored events. By time, not
    by id: a claim writes out the previous delivery's pull when it takes the message again,
    after that delivery's later events. Equal times keep row events first, then id order."""
    stored = MessageTrace.objects.filter(message_id=message.id).order_by("id")
    return sorted([*row_events(message), *stored], key=lambda event: event.at)


def message_detail(
    *, principal: Principal, message_id: int
) -> tuple[Message | MessageArchive, list[MessageTrace]]:
    """A live message, or, once retention moved it out of the hot table, its archived copy
    (same id, same fields, the same trace plus an `archived` event)."""
    try:
        message: Message | MessageArchive = message_get(principal=principal, message_id=message_id)
    except NotFound:
        message = archive_get(principal=principal, message_id=message_id)
    return message, message_trace(message)


def topic_stats(*, principal: Principal, topic: str | None = None) -> list[dict[str, Any]]:
    """Per (topic, group): counts by status and the oldest deliverable message's age.

    Reads the claim index only (an index-only GROUP BY). The maintenance flush job keeps
    per-minute buckets for rates and dashboards.
    """
    now = timezone.now()
    rows = Message.objects.all()
    if topic:
        rows = rows.filter(topic=topic)
    visible_topics = None
    if principal.biz_ids is not None:
        visible_topics = set(Topic.objects.filter(biz_id__in=principal.biz_ids).values_list("name", flat=True))
    counts = rows.values("topic", "group_name", "status").annotate(n=Count("id")).order_by()
    oldest = (
        rows.filter(status=Status.NEW, effect_time__lte=now)
        .values("topic", "group_name")
        .annotate(oldest=Min("effect_time"))
        .order_by()
    )
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
    for row in oldest:
        found = stats.get((row["topic"], row["group_name"]))
        if found is not None and isinstance(row["oldest"], datetime):
            found["oldest_deliverable_age_seconds"] = round((now - row["oldest"]).total_seconds(), 3)
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
        if topic_row is not None and not principal.may_biz(topic_row.biz_id):
            raise NotFound(f"Topic {topic!r} does not exist.", details={"topic": topic})
        if topic_row is None and principal.biz_ids is not None:
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


# --- the archive -------------------------------------------------------------------------


def archive_get(*, principal: Principal, message_id: int) -> MessageArchive:
    """An archived message the principal may see (NotFound otherwise, as for live ones)."""
    message = MessageArchive.objects.filter(id=message_id).first()
    if message is None:
        raise NotFound(f"Message {message_id} does not exist.", details={"id": message_id})
    topic = Topic.objects.filter(name=message.topic).first()
    if topic is None:
        hidden = principal.biz_ids is not None or topic_is_deleting(message.topic)
    else:
        hidden = not principal.may_biz(topic.biz_id)
    if hidden:
        raise NotFound(f"Message {message_id} does not exist.", details={"id": message_id})
    return message


def archive_search(
    *, principal: Principal, filter: MessageFilter, cursor: str | None = None, limit: int = PAGE_SIZE
) -> tuple[list[MessageArchive], str | None]:
    """Search archived messages with the same filter and keyset pagination as live ones."""
    return _keyset_page(filter.queryset(principal, model=MessageArchive), cursor, limit)


# --- maintenance health and alarms (console) --------------------------------------------


def maintenance_health() -> list[dict[str, Any]]:
    """Each maintenance job's last run: outcome, when, how long, what it did, last error.
    Jobs that never ran are listed with outcome None (beat or the worker is not running)."""
    from messages.models import MaintenanceRun
    from messages.services.runs import JOBS

    runs = {r.job: r for r in MaintenanceRun.objects.all()}
    out = []
    for job in (*JOBS, *sorted(set(runs) - set(JOBS) - {"export"})):
        run = runs.get(job)
        out.append({
            "job": job,
            "outcome": run.outcome if run and run.runs else None,
            "last_started_at": run.last_started_at if run else None,
            "last_finished_at": run.last_finished_at if run else None,
            "last_ok_at": run.last_ok_at if run else None,
            "last_duration_ms": run.last_duration_ms if run else None,
            "last_result": run.last_result if run else {},
            "last_error": run.last_error if run else "",
            "runs": run.runs if run else 0,
        })
    return out


def alarms_recent(*, principal: Principal, topic: str | None = None, limit: int = 50) -> list[Any]:
    """The latest alarms (newest first) on topics the principal may see."""
    from messages.models import Alarm

    rows = Alarm.objects.all()
    if topic:
        rows = rows.filter(topic=topic)
    if principal.biz_ids is not None:
        rows = rows.filter(topic__in=Topic.objects.filter(biz_id__in=principal.biz_ids).values("name"))
    return list(rows.order_by("-created_at", "-id")[: max(1, min(limit, 500))])
