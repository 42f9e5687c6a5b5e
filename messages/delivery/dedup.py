"""Uniqueness for a time window, and refusing duplicates.

A produce item's `dedup_seconds` makes its `dedup_key` unique for that long from the first
produce: the stored row carries `dedup_until`. The produce path stores a batch without
looking its keys up; only when the unique index refuses a key does it look the stored
messages up (messages/delivery/produce.py), and then a stored key whose window has passed is
freed here (the row keeps everything but the key, which goes to its `last_log`) and the new
message is stored in its place. `dedup_conflict: "reject"` answers a duplicate with 409
`duplicate` naming the first message's id instead of answering that message.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from messages.models import Message
from mqcenter.core.errors import MQError

MAX_DEDUP_SECONDS = 30 * 86400
CONFLICT_MODES = ("first", "reject")


class Duplicate(MQError):
    """A produce item repeats a dedup key still in use and asked to be refused."""

    status, code = 409, "duplicate"


def dedup_windows_passed(found: dict[Any, Message], now: datetime) -> dict[Any, Message]:
    """Of the stored messages holding the keys a produce repeats, those whose `dedup_until`
    passed give their key up (in the produce's transaction): the rest are the duplicates."""
    passed = [m for m in found.values() if m.dedup_until is not None and m.dedup_until <= now]
    if not passed:
        return found
    for message in passed:
        Message.objects.filter(id=message.id, dedup_until__lte=now).update(
            dedup_key=None, dedup_until=None, last_log=f"dedup key {message.dedup_key!r} freed at {now.isoformat()}")
    freed = {m.id for m in passed}
    return {key: m for key, m in found.items() if m.id not in freed}


def dedup_refuse(items: Sequence[Any], repeated: Sequence[tuple[str, str, int | None]]) -> None:
    """Raise Duplicate (409) if an item asking `dedup_conflict: "reject"` repeats a key:
    `repeated` holds (topic, dedup key, the stored message's id, None when the first is in
    this batch)."""
    rejecting = {(item.topic, item.dedup_key): index for index, item in enumerate(items)
                 if item.dedup_conflict == "reject" and item.dedup_key is not None}
    if not rejecting:
        return
    for topic, key, first_id in repeated:
        index = rejecting.get((topic, key))
        if index is not None:
            where = f"message {first_id}" if first_id is not None else "an earlier message of this batch"
            raise Duplicate(
                f"messages[{index}].dedup_key {key!r} of topic {topic!r} is taken by {where}.",
                details={"field": f"messages[{index}].dedup_key", "topic": topic, "dedup_key": key,
                         "first_id": first_id},
            )
