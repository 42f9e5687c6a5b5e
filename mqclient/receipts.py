"""Receipts: the broker's answer to a produce, turned into one `ProducedMessage` per
message sent."""

from __future__ import annotations

from collections import Counter
from typing import Any

from mqclient.errors import MQClientError
from mqclient.message import ProducedMessage
from mqclient.outgoing import OutgoingMessage


class AnswerMismatch(MQClientError):
    """The broker's answer does not match the messages sent (a broker/SDK version mismatch)."""


def receipts(answer: Any, sent: list[OutgoingMessage]) -> list[ProducedMessage]:
    """Turn a ``201`` answer into one receipt per message sent, in order.

    The answer has one entry per stored message, item by item: one for a message with a
    ``group``, one per subscribed group for a publish. Every publish to a topic in one call is
    copied to the same groups, so a topic's copy count is its entries, less its point-to-point
    messages, divided by its publishes; the entries are then consumed in order.
    """
    entries = list((answer or {}).get("messages") or [])
    # Publishes to a topic with filtered groups: each entry names its item (none at all: no
    # group's filter wanted any of them; a message to a named group always has one).
    if any("item" in entry for entry in entries) or (not entries and sent and all(o.publish for o in sent)):
        by_item: list[list[dict[str, Any]]] = [[] for _ in sent]
        for entry in entries:
            index = entry.get("item")
            if not isinstance(index, int) or not 0 <= index < len(sent):
                raise AnswerMismatch(f"the broker answered an entry for item {index!r} of {len(sent)} sent")
            by_item[index].append(entry)
        return [
            ProducedMessage.from_copies(chunk, dedup_key=out.dedup_key or None, sdk_key=out.sdk_key,
                                        topic=str(out.body["topic"]))
            for out, chunk in zip(sent, by_item, strict=True)
        ]
    copies = _copies_per_topic(entries, sent)
    found: list[ProducedMessage] = []
    position = 0
    for out in sent:
        count = copies[_topic_key(out.body["topic"])] if out.publish else 1
        chunk = entries[position : position + count]
        position += count
        found.append(
            ProducedMessage.from_copies(chunk, dedup_key=out.dedup_key or None, sdk_key=out.sdk_key)
        )
    return found


def _topic_key(name: Any) -> str:
    return str(name).casefold()  # topic names compare as the database does


def _copies_per_topic(entries: list[dict[str, Any]], sent: list[OutgoingMessage]) -> dict[str, int]:
    """How many copies each publish to a topic got; AnswerMismatch when the counts do not add up."""
    stored = Counter(_topic_key(entry.get("topic", "")) for entry in entries)
    single: Counter[str] = Counter()
    publishes: Counter[str] = Counter()
    for out in sent:
        (publishes if out.publish else single)[_topic_key(out.body["topic"])] += 1
    copies: dict[str, int] = {}
    for topic in set(stored) | set(single) | set(publishes):
        rest = stored[topic] - single[topic]
        if publishes[topic]:
            copies[topic], left = divmod(rest, publishes[topic])
            fits = left == 0 and copies[topic] >= 1
        else:
            fits = rest == 0
        if not fits:
            raise AnswerMismatch(
                f"the broker answered {len(entries)} entries, which do not match the "
                f"{len(sent)} message(s) sent"
            )
    return copies
