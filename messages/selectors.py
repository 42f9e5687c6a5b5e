"""Reads of messages for the API and the console: search with keyset pagination, one
message with its trace (live, or its archived copy), and the activity pages: scheduled
(delayed) messages, retrying messages and what each consumer is doing now. Each activity
read is bounded by an index range:

- scheduled: per visible (topic, group), the `ix_msg_priority` ranges status=NEW,
  effect_time > now, one per priority level, soonest first, at most PER_GROUP rows;
- retrying: the newest SCAN_BOUND NEW rows (`ix_msg_status` backwards) with attempt > 0;
- in flight: the RUNNING rows (`ix_msg_status`), at most SCAN_BOUND, grouped by lease owner.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from messages.archive.models import MessageArchive
from messages.archive.selectors import archive_get
from messages.delivery.sql import in_time_order
from messages.delivery.trace import row_events
from messages.filters import MessageFilter
from messages.keyset import PAGE_SIZE, keyset_page
from messages.models import Message, MessageTrace, Status
from messages.services import message_get
from mqcenter.core.auth import Principal
from mqcenter.core.errors import NotFound
from topics.models import TopicGroup


def messages_search(
    *, principal: Principal, filter: MessageFilter, cursor: str | None = None, limit: int = PAGE_SIZE
) -> tuple[list[Message], str | None]:
    """Newest first, keyset-paginated on id: each page is one index range scan, whatever
    the table size, and there is never a COUNT."""
    return keyset_page(filter.queryset(principal), cursor, limit)


def message_trace(message: Message | MessageArchive) -> list[MessageTrace]:
    """The message's trace, oldest first: the events its row holds ("produced", a claim's
    pull, a first delivery's ack, see `trace.row_events`) among the stored events. By time, not
    by id: a claim writes out the previous delivery's pull when it takes the message again,
    after that delivery's later events. Equal times keep row events first, then id order."""
    stored = list(MessageTrace.objects.filter(message_id=message.id).order_by("id"))
    return sorted([*row_events(message, stored), *stored], key=lambda event: event.at)


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


# --- activity ----------------------------------------------------------------------------

PER_GROUP = 50
SCAN_BOUND = 2000
SHOWN = 200
_FIELDS = ("id", "topic", "group_name", "key", "attempt", "effect_time", "last_log", "lease_owner",
           "lease_expires_at", "pulled_at", "update_time")


def _visible_groups(principal: Principal) -> list[tuple[str, str]]:
    rows = TopicGroup.objects.select_related("topic")
    if principal.biz_ids is not None:
        rows = rows.filter(topic__biz_id__in=principal.biz_ids)
    return [(g.topic.name, g.name) for g in rows.order_by("topic__name", "name")[:500]]


def messages_scheduled(*, principal: Principal) -> list[dict[str, Any]]:
    """NEW messages due later, soonest first."""
    now = timezone.now()
    out: list[dict[str, Any]] = []
    for topic, group in _visible_groups(principal):
        rows = MessageFilter(topic=topic, group=group, status=(Status.NEW,)).queryset(principal)
        out.extend(in_time_order(rows.filter(effect_time__gt=now).values(*_FIELDS), PER_GROUP))
    out.sort(key=lambda r: r["effect_time"])
    for row in out:
        row["due_in"] = (row["effect_time"] - now).total_seconds()
    return out[:SHOWN]


def messages_retrying(*, principal: Principal) -> list[dict[str, Any]]:
    """NEW messages that were delivered before (attempt > 0), waiting for their next try."""
    now = timezone.now()
    rows = MessageFilter(status=(Status.NEW,)).queryset(principal).order_by("-id").values(*_FIELDS)[:SCAN_BOUND]
    out = [r for r in rows if r["attempt"] > 0]
    for row in out:
        row["due_in"] = (row["effect_time"] - now).total_seconds()
    return out[:SHOWN]


def consumers_in_flight(*, principal: Principal) -> list[dict[str, Any]]:
    """Per lease owner: its leased messages, the oldest lease age and the soonest expiry."""
    now = timezone.now()
    rows = MessageFilter(status=(Status.RUNNING,)).queryset(principal).order_by("id").values(*_FIELDS)[:SCAN_BOUND]
    by_owner: dict[str, dict[str, Any]] = {}
    for row in rows:
        leased_at = row["pulled_at"] or row["update_time"]
        row["lease_age"] = (now - leased_at).total_seconds()
        entry = by_owner.setdefault(row["lease_owner"] or "(unknown)", {
            "consumer": row["lease_owner"] or "(unknown)", "messages": [], "oldest_age": 0.0, "expires": None})
        entry["messages"].append(row)
        entry["oldest_age"] = max(entry["oldest_age"], row["lease_age"])
        if row["lease_expires_at"] and (entry["expires"] is None or row["lease_expires_at"] < entry["expires"]):
            entry["expires"] = row["lease_expires_at"]
    return sorted(by_owner.values(), key=lambda e: -e["oldest_age"])
