"""A topic's `max_backlog`, exact under racing producers on any number of brokers, and its
overflow policy.

A produce that writes to a group of a topic with a `max_backlog` locks that group's row
(`SELECT ... FOR UPDATE`, groups in name order) in its own transaction before it counts the
group's NEW messages, and keeps the lock until it commits its rows: two produces to one
capped group take turns, and the second counts the first's rows. Claims only lower the
count, so a group never holds more NEW messages from produces than the cap. A topic without
a `max_backlog` pays nothing: no lock, no count.

When the batch would overfill a group, the topic's `overflow` decides: `reject` refuses the
whole batch (429 backlog_full, nothing stored); `drop_oldest` and `dead_letter_oldest`
(RabbitMQ's `drop-head` and its dead-lettering form) both end the group's oldest deliverable
messages EXPIRED, as API.md states, with the log "overflow" and a `dead` trace event naming
the policy, in the produce's transaction. Messages another transaction holds (a claim
under way) are skipped; when not enough can be removed, the produce is refused as with
`reject`. A batch that alone holds more messages for a group than its cap can never fit:
400, whatever the policy.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection

from messages.batches.progress import batches_finished
from messages.delivery.trace import trace_row, trace_write
from messages.models import Message, Status, TraceEvent
from messages.stats.live import live_moved
from mqcenter.core import metrics
from mqcenter.core.errors import BacklogFull, InvalidRequest
from topics.locks import lock_topic
from topics.models import Overflow, Topic

OVERFLOW_LOG = "overflow"


def backlog_incoming(rows: Sequence[Any], topics: dict[str, Topic]) -> Counter[tuple[str, str]]:
    """The rows of a batch per capped (topic, group), 400 when one alone exceeds the cap."""
    incoming = Counter((r.topic, r.group_name) for r in rows if topics[r.topic].max_backlog is not None)
    for (topic, group), count in incoming.items():
        limit = topics[topic].max_backlog
        if count > limit:  # type: ignore[operator]
            raise InvalidRequest(
                f"This batch holds {count} messages for group {group!r} of topic {topic!r}, more than its "
                f"max_backlog of {limit}: it can never fit. Send at most {limit} per call.",
                details={"field": "messages", "topic": topic, "group": group, "max_backlog": limit,
                         "incoming": count},
            )
    return incoming


def backlog_make_room(rows: Sequence[Any], topics: dict[str, Topic], *, now: datetime) -> None:
    """Before a batch's insert, in its transaction: lock each capped group it writes to and
    check (and, by the topic's overflow policy, make) room for its rows; BacklogFull when
    there is none. Rows are anything with `topic` and `group_name`."""
    incoming = backlog_incoming(rows, topics)
    if not incoming:
        return
    _lock_groups(topics, sorted(incoming))
    for (topic, group), count in sorted(incoming.items()):
        limit: int = topics[topic].max_backlog  # type: ignore[assignment]
        backlog = Message.objects.filter(topic=topic, group_name=group, status=Status.NEW).values("id")[: limit + 1].count()
        excess = backlog + count - limit
        if excess <= 0:
            continue
        policy = topics[topic].overflow
        if policy != Overflow.REJECT and _evict(topic, group, excess, policy, now) == excess:
            continue
        retry_after = settings.MQ_BACKLOG_RETRY_AFTER_SECONDS
        raise BacklogFull(
            f"Group {group!r} of topic {topic!r} holds {backlog if backlog <= limit else f'over {limit}'} "
            f"waiting messages; this produce would put it over its max_backlog of {limit}. Retry later.",
            details={"topic": topic, "group": group, "max_backlog": limit, "backlog": min(backlog, limit + 1),
                     "incoming": count, "retry_after": retry_after},
        )


def _lock_groups(topics: dict[str, Topic], pairs: list[tuple[str, str]]) -> None:
    """Lock the group rows of these (topic, group) pairs, in (topic, name) order. A group row
    exists for nearly every group a produce writes to: subscribed groups, and named ones
    (added before the produce's transaction, `topics.services.groups_address`). `default` of
    a topic without subscribers gets its row after its first publish: until then the topic's
    row is locked exclusively instead (a publish holds it shared: two such first publishes
    may deadlock, and the one the database picks is retried, by then finding the row)."""
    if not connection.features.has_select_for_update:
        return  # SQLite: writers queue for the database
    table = connection.ops.quote_name("topics_topicgroup")
    by_topic: dict[str, list[str]] = {}
    for topic, group in pairs:
        by_topic.setdefault(topic, []).append(group)
    with connection.cursor() as cursor:
        for topic in sorted(by_topic):
            names = by_topic[topic]
            marks = ", ".join(["%s"] * len(names))
            cursor.execute(
                f"SELECT id FROM {table} WHERE topic_id = %s AND name IN ({marks}) ORDER BY name FOR UPDATE",  # noqa: S608 - a quoted table name
                [topics[topic].pk, *names],
            )
            if len(cursor.fetchall()) < len(names):
                lock_topic(topics[topic].pk, share=False)


def _evict(topic: str, group: str, count: int, policy: str, now: datetime) -> int:
    """Finish the `count` oldest deliverable messages of the group (those no other transaction
    holds) as the overflow policy says. Returns how many were finished."""
    quote = connection.ops.quote_name
    skip = " SKIP LOCKED" if connection.features.has_select_for_update_skip_locked else ""
    lock = f" FOR UPDATE{skip}" if connection.features.has_select_for_update else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, attempt, batch_id FROM {quote('mq_message')} WHERE topic = %s AND group_name = %s AND status = %s "  # noqa: S608 - a quoted table name
            f"AND effect_time <= %s ORDER BY id LIMIT %s{lock}",
            [topic, group, Status.NEW, connection.ops.adapt_datetimefield_value(now), count],
        )
        found = cursor.fetchall()
    if len(found) < count:
        return 0  # not enough room can be made: the produce is refused, nothing changed
    status = Status.EXPIRED
    ids = [pk for pk, _attempt, _batch in found]
    Message.objects.filter(id__in=ids, status=Status.NEW).update(
        status=status, update_time=now, last_log=OVERFLOW_LOG, lease_owner=None, lease_expires_at=None)
    event = TraceEvent.DEAD
    trace_write(
        trace_row(_Row(pk, attempt, status, batch), event, at=now, actor="broker",
                  log=f"overflow: max_backlog reached, {policy}")
        for pk, attempt, batch in found
    )
    batches_finished((_Row(pk, attempt, status, batch) for pk, attempt, batch in found), now=now)
    metrics.expired.inc(len(ids))
    live_moved((topic, group, Status.NEW, status) for _ in ids)
    return len(ids)


class _Row:
    __slots__ = ("attempt", "batch_id", "id", "status")

    def __init__(self, pk: int, attempt: int, status: str, batch_id: str | None) -> None:
        self.id, self.attempt, self.status, self.batch_id = pk, attempt, status, batch_id
