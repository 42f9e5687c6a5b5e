"""Dead letters grouped by what went wrong: (topic, group, normalised reason).

The reason of a dead letter is the first line of its last log with the parts that differ
from one message to the next (quoted values, ids, numbers) replaced, so 2,000 rejects logged
`bad payload for item N` are one group. A TIMEOUT message has no consumer log: its reason is
the log of its last `lease_expired` / `dead` trace event. An EXPIRED message's log says it
expired undelivered.

Bound: grouping reads the newest DEAD_LETTER_BOUND dead letters per status, each a backward
range of the (status, id) index `ix_msg_status` (plus the primary-key lookups for their
logs), never the whole hot table. Past the bound the page says the counts are "at least".
A group action walks only its own (topic, group) dead rows along `ix_msg_order`.
"""

from __future__ import annotations

import re
from typing import Any

from django.db.models import Max

from messages.filters import MessageFilter
from messages.models import DEAD_STATUSES, MessageTrace, TraceEvent
from mqcenter.core.auth import Principal

DEAD_LETTER_BOUND = 10_000
NO_REASON = "(no log)"

_QUOTED = re.compile(r"""'[^']*'|"[^"]*"|`[^`]*`""")
_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_HEX_ID = re.compile(r"\b(?=[0-9a-fA-F]*[0-9])(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{12,}\b")
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[T ][0-9:.]+(?:[+-]\d{2}:\d{2}|Z)?")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_SPACES = re.compile(r"\s+")


def dead_letter_reason_normalise(*, log: str) -> str:
    """The grouping key of a log: its first non-blank line with quoted values, UUIDs, long
    hex ids, timestamps and numbers replaced by placeholders, at most 160 characters."""
    lines = [line for line in (log or "").splitlines() if line.strip()]
    if not lines:
        return NO_REASON
    text = _QUOTED.sub("<v>", lines[0].strip())
    text = _UUID.sub("<id>", text)
    text = _HEX_ID.sub("<id>", text)
    text = _TIMESTAMP.sub("<time>", text)
    text = _NUMBER.sub("<n>", text)
    return _SPACES.sub(" ", text)[:160]


def _trace_logs(ids: list[int]) -> dict[int, str]:
    """The log of each message's last lease_expired/dead trace event (TIMEOUT reasons)."""
    out: dict[int, str] = {}
    events = (TraceEvent.LEASE_EXPIRED, TraceEvent.DEAD)
    for start in range(0, len(ids), 1000):
        chunk = ids[start : start + 1000]
        last = (MessageTrace.objects.filter(message_id__in=chunk, event__in=events)
                .values("message_id").annotate(last=Max("id")).values_list("last", flat=True))
        for message_id, log in MessageTrace.objects.filter(id__in=list(last)).values_list("message_id", "log"):
            out[message_id] = log
    return out


def _with_reasons(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    silent = [r["id"] for r in rows if not (r["last_log"] or "").strip()]
    traced = _trace_logs(silent) if silent else {}
    for row in rows:
        log = row["last_log"] if (row["last_log"] or "").strip() else traced.get(row["id"], "")
        row["reason"] = dead_letter_reason_normalise(log=log)
        row["log"] = log
    return rows


_FIELDS = ("id", "topic", "group_name", "status", "last_log", "update_time")


def dead_letter_groups(
    *, principal: Principal, topic: str | None = None, bound: int = DEAD_LETTER_BOUND
) -> tuple[list[dict[str, Any]], bool]:
    """Dead letters grouped by (topic, group, reason), largest first, from the newest
    `bound` of each dead status. Returns (groups, truncated): truncated means the bound
    was reached and counts are lower bounds. Each group has count, first_seen, last_seen,
    statuses, a sample (the newest message: id and its log) and the reason."""
    rows: list[dict[str, Any]] = []
    truncated = False
    for status in DEAD_STATUSES:
        query = MessageFilter(status=(status,), topic=topic).queryset(principal)
        part = list(query.order_by("-id").values(*_FIELDS)[: bound + 1])
        truncated = truncated or len(part) > bound
        rows.extend(part[:bound])
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    for row in _with_reasons(rows):
        key = (row["topic"], row["group_name"], row["reason"])
        entry = groups.get(key)
        if entry is None:
            entry = groups[key] = {
                "topic": row["topic"], "group": row["group_name"], "reason": row["reason"], "count": 0,
                "statuses": set(), "first_seen": row["update_time"], "last_seen": row["update_time"],
                "sample_id": row["id"], "sample_log": row["log"],
            }
        entry["count"] += 1
        entry["statuses"].add(row["status"])
        entry["first_seen"] = min(entry["first_seen"], row["update_time"])
        if row["update_time"] > entry["last_seen"] or (row["update_time"] == entry["last_seen"] and row["id"] > entry["sample_id"]):
            entry["last_seen"], entry["sample_id"], entry["sample_log"] = row["update_time"], row["id"], row["log"]
    ordered = sorted(groups.values(), key=lambda g: (-g["count"], g["topic"], g["group"], g["reason"]))
    for g in ordered:
        g["statuses"] = sorted(g["statuses"])
    return ordered, truncated


def _group_rows(principal: Principal, topic: str, group: str) -> Any:
    return MessageFilter(topic=topic, group=group, status=DEAD_STATUSES).queryset(principal)


def dead_letter_group_ids(
    *, principal: Principal, topic: str, group: str, reason: str, before_id: int | None = None, limit: int,
) -> list[int]:
    """Ids (newest first, below `before_id`) of the (topic, group) dead letters whose
    normalised reason is `reason`, at most `limit`. Walks the group's dead rows in batches."""
    ids: list[int] = []
    cursor = before_id
    while len(ids) < limit:
        rows = _group_rows(principal, topic, group)
        if cursor is not None:
            rows = rows.filter(id__lt=cursor)
        batch = list(rows.order_by("-id").values("id", "last_log")[:2000])
        if not batch:
            break
        ids.extend(r["id"] for r in _with_reasons(batch) if r["reason"] == reason)
        cursor = batch[-1]["id"]
    return ids[:limit]
