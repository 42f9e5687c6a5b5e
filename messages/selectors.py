"""Reads for the API and the console: search with keyset pagination, detail, stats."""

from __future__ import annotations

import base64
import binascii
from datetime import datetime
from typing import Any

from django.db.models import Count, Min
from django.utils import timezone

from messages.filters import MessageFilter
from messages.models import Message, MessageTrace, Status
from messages.services.operations import message_get
from mqcenter.auth import Principal
from mqcenter.errors import InvalidRequest
from topics.models import Topic

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
    limit = max(1, min(limit, MAX_PAGE_SIZE))
    rows = filter.queryset(principal)
    if cursor:
        rows = rows.filter(id__lt=cursor_decode(cursor))
    page = list(rows.order_by("-id")[: limit + 1])
    next_cursor = cursor_encode(page[limit - 1].id) if len(page) > limit else None
    return page[:limit], next_cursor


def message_trace(message_id: int) -> list[MessageTrace]:
    return list(MessageTrace.objects.filter(message_id=message_id).order_by("id"))


def message_detail(*, principal: Principal, message_id: int) -> tuple[Message, list[MessageTrace]]:
    message = message_get(principal=principal, message_id=message_id)
    return message, message_trace(message.id)


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
        entry = stats.get((row["topic"], row["group_name"]))
        if entry is not None and isinstance(row["oldest"], datetime):
            entry["oldest_deliverable_age_seconds"] = round((now - row["oldest"]).total_seconds(), 3)
    return [stats[key] for key in sorted(stats)]
