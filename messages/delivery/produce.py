"""Produce: store a batch of messages durably, all or nothing, before anyone is told."""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import repeat
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from messages.delivery import sql
from messages.delivery.dedup import dedup_refuse, dedup_windows_passed
from messages.delivery.handoff import HandOff
from messages.delivery.sql_insert import NewMessage, insert_statements, insert_values
from messages.models import DEFAULT_PRIORITY, Message, Status
from messages.overflow import backlog_make_room
from messages.routing.filters import Subscription, copies_for, skipped_record, subscriptions_locked
from messages.stats.live import live_moved
from mqcenter.core import metrics
from mqcenter.core.auth import Principal
from mqcenter.core.db import retry_on_lock_conflict
from mqcenter.core.errors import Forbidden, InvalidRequest
from registry.wakeups import wakeup_hub
from topics.cache import topic_cache
from topics.models import Topic
from topics.services import DEFAULT_GROUP, groups_address, topics_for_produce

logger = logging.getLogger(__name__)

# A batch is first inserted without looking its dedup keys up: the SDK gives every message
# a key of its own, so nearly every key is new, and the look-up was one of a produce's five
# statements. A key already stored fails the insert on the unique index, and the batch is
# retried with the look-up, which answers the stored message as the duplicate. Once more for
# two identical produces racing: the loser's insert fails and its retry finds the winner's row.
DEDUP_RACE_RETRIES = 3


# Not frozen: a frozen dataclass sets each of its 11 fields through object.__setattr__, 4 us
# an item against 0.7 here, paid for every message of every produce.
@dataclass(slots=True)
class ProduceItem:
    topic: str
    data: str  # the JSON text of `data`, already validated and size-checked
    group: str | None = None
    key: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_seconds: float | None = None
    effect_time: datetime | None = None
    retry_count: int | None = None
    timeout_seconds: int | None = None
    dedup_key: str | None = None
    broadcast: bool = False  # the same as no group: one copy per subscribed group
    priority: int = DEFAULT_PRIORITY
    ttl_seconds: float | None = None  # or expires_at: not delivered by then, EXPIRED
    expires_at: datetime | None = None
    tag: str | None = None  # what subscription filters select on (messages/routing/)
    batch_id: str | None = None  # set by a batch's produce (messages/batches/)
    dedup_seconds: int | None = None  # the key is unique this long, then free (messages/delivery/dedup.py)
    dedup_conflict: str = "first"  # or "reject": a duplicate answers 409


@dataclass(slots=True)  # not frozen, as ProduceItem
class ProduceResult:
    id: int
    topic: str
    group: str
    status: str
    duplicate: bool
    # The produce item this is a copy of (its index), answered when publishes of the call
    # went to a topic with filtered groups: their copy counts then differ item by item.
    item: int | None = None

    def as_dict(self) -> dict[str, Any]:
        answer = {
            "id": self.id,
            "topic": self.topic,
            "group": self.group,
            "status": self.status,
            "duplicate": self.duplicate,
        }
        if self.item is not None:
            answer["item"] = self.item
        return answer


@retry_on_lock_conflict
def messages_produce(*, principal: Principal, items: list[ProduceItem]) -> list[ProduceResult]:
    """Store every item in one transaction: an item naming a group once, for that group; an
    item without one (a publish) once for every group subscribed to its topic.

    Returns only after the commit, so a 201 means the messages are durable. A batch that
    would put a group over its topic's `max_backlog` raises BacklogFull and stores nothing,
    or makes room by the topic's overflow policy (messages/overflow.py).
    A repeated
    `dedup_key` within (topic, group) returns the stored message with duplicate=True and
    stores nothing. Waiting pulls are woken after the commit, never before.
    """
    if not items:
        raise InvalidRequest("Send at least one message.", details={"field": "messages"})
    if len(items) > settings.MQ_MAX_PRODUCE_BATCH:
        raise InvalidRequest(
            f"At most {settings.MQ_MAX_PRODUCE_BATCH} messages per call.",
            details={"field": "messages"},
        )
    for index, item in enumerate(items):
        if not principal.may("produce", item.topic):
            raise Forbidden(
                f"This token has no produce scope for topic {item.topic!r}.",
                details={"field": f"messages[{index}].topic", "topic": item.topic},
            )
    names = {item.topic for item in items}
    if settings.MQ_AUTO_CREATE_TOPICS and len(topic_cache.get_many(names)) < len(names):
        # A topic is created only by a produce that stores its batch: with one to create, the
        # whole call is one transaction, so a refusal after the creation leaves no topic behind.
        with transaction.atomic():
            return _produce(principal, items, names)
    return _produce(principal, items, names)


def _produce(principal: Principal, items: list[ProduceItem], names: set[str]) -> list[ProduceResult]:
    # Topics and the groups messages name first, each addition committed on its own: the
    # message transaction stays short, and an added topic or group with no messages yet is
    # harmless. A group a message names is not subscribed by it (groups_address).
    topics = topics_for_produce(principal=principal, names=names, auto_create=settings.MQ_AUTO_CREATE_TOPICS)
    named: dict[str, set[str]] = defaultdict(set)
    for item in items:
        if not _is_publish(item):
            named[item.topic].add(item.group)  # type: ignore[arg-type]
    for name, groups in named.items():
        groups_address(topic=topics[name], names=groups)
    published = {item.topic for item in items if _is_publish(item)}
    # A batch of named groups that fits in one INSERT is atomic and, committed on its own
    # (autocommit), as durable as a transaction: it skips START TRANSACTION and COMMIT. A
    # publish takes a transaction (it reads the groups under the topic's lock), and so does a
    # bigger batch, so that it is still stored all or nothing.
    one_statement = (
        not published
        and insert_statements(len(items), return_ids=True) == 1
        and not connection.in_atomic_block
        and all(topic.max_backlog is None for topic in topics.values())  # a cap locks in a transaction
    )
    # Inside a caller's transaction the commit comes later: nothing is handed off then. (A
    # caller's raw `sql.short_transaction` would not show here: no caller produces in one,
    # as the one-statement insert above also assumes.)
    hands_off = not connection.in_atomic_block
    for attempt in range(DEDUP_RACE_RETRIES + 1):
        handoff = HandOff()
        try:
            with contextlib.nullcontext() if one_statement else sql.short_transaction():
                subscribed = {
                    name: _subscriptions(topics[name]) for name in sorted(published)  # sorted: one lock order
                }
                results, woken = _store(principal, items, topics, subscribed, look_up_dedup=attempt > 0,
                                        handoff=handoff if hands_off else None)
        except IntegrityError:
            handoff.decline()
            if attempt < DEDUP_RACE_RETRIES:
                continue
            raise
        except BaseException:
            handoff.decline()
            raise
        try:
            for name, copies_to in subscribed.items():
                if copies_to == _NO_SUBSCRIBER:  # the topic had no subscriber: `default` keeps them
                    groups_address(topic=topics[name], names=[DEFAULT_GROUP], required=False)
            # Wake hints only after the commit: no pull may look before the rows are there.
            if connection.in_atomic_block:
                transaction.on_commit(lambda pairs=woken: wakeup_hub().publish(pairs))  # type: ignore[misc]
            else:
                wakeup_hub().publish(woken)
            _count(results)
            live_moved((r.topic, r.group, None, Status.NEW) for r in results if not r.duplicate)
        finally:
            # After the wake hints, so other processes claim the rest of a burst meanwhile;
            # whatever happens, since each pull handed rows waits for them.
            handoff.fulfil()
        return results
    raise AssertionError("unreachable")


def _is_publish(item: ProduceItem) -> bool:
    return item.group is None or item.broadcast


_NO_SUBSCRIBER = [Subscription(None, DEFAULT_GROUP, None)]


def _subscriptions(topic: Topic) -> list[Subscription]:
    """The groups a publish to `topic` is copied to, with their filters, read under the
    topic's shared lock. A topic nobody subscribed to keeps its messages in `default`, which
    that does not subscribe: once a group subscribes, publishes go to the subscribers only."""
    return subscriptions_locked(topic.pk) or _NO_SUBSCRIBER


def _store(
    principal: Principal, items: list[ProduceItem], topics: dict[str, Topic], subscribed: dict[str, list[Subscription]],
    *, look_up_dedup: bool, handoff: HandOff | None = None,
) -> tuple[list[ProduceResult], Counter[tuple[str, str]]]:
    """Insert the batch. No trace row: a message's "produced" event is its row (`producer`,
    `add_time`). Returns the results and how many messages each (topic, group) got that no
    pull of this process was handed (`handoff`), to wake that many waiting pulls. Without
    `look_up_dedup`, a dedup key already stored fails the insert (IntegrityError) instead of
    answering the duplicate."""
    now = timezone.now()
    producer = principal.name[:200]
    rows: list[NewMessage] = []
    # A publish is copied to every subscribed group, or to those whose filter matches when
    # its topic has filtered groups (then each copy names its item in the answer).
    plain = {name: [s.name for s in subs] for name, subs in subscribed.items() if all(s.matches is None for s in subs)}
    skipped: Counter[int] = Counter()
    filtered = len(plain) < len(subscribed)
    items_of: list[int] = []  # per row, only when filters chose copies: the item it copies
    for index, item in enumerate(items):
        topic = topics[item.topic]
        if _is_publish(item):
            publish_id = secrets.randbits(63)
            groups = plain.get(item.topic)
            if groups is None:
                groups = copies_for(subscribed[item.topic], item.tag, item.headers, skipped)
            rows.extend(_message_row(item, topic, group, now, producer, publish_id) for group in groups)
            if filtered:
                items_of.extend([index] * len(groups))
        else:
            rows.append(_message_row(item, topic, item.group, now, producer, None))  # type: ignore[arg-type]
            if filtered:
                items_of.append(index)
    existing = dedup_windows_passed(_existing_by_dedup(rows), now) if look_up_dedup else {}
    repeated: list[tuple[str, str, int | None]] = []  # (topic, key, first id): for dedup_conflict
    fresh: list[NewMessage] = []  # the rows to insert
    # Per row, in order: the stored duplicate it repeats, or (index in `fresh`, duplicate?).
    plan: list[ProduceResult | tuple[int, bool, int | None]] = []
    first_in_batch: dict[tuple[str, str, str], int] = {}  # dedup key -> index in `fresh`
    for row, item_index in zip(rows, items_of if filtered else repeat(None), strict=False):  # repeat: endless
        if row.dedup_key is not None:
            dedup = (row.topic, row.group_name, row.dedup_key)
            if dedup in existing:
                stored = existing[dedup]
                plan.append(ProduceResult(stored.id, stored.topic, stored.group_name, stored.status, True, item_index))
                repeated.append((row.topic, row.dedup_key, stored.id))
                continue
            if dedup in first_in_batch:  # a later copy in this batch repeats the first
                plan.append((first_in_batch[dedup], True, item_index))
                repeated.append((row.topic, row.dedup_key, None))
                continue
            first_in_batch[dedup] = len(fresh)
        plan.append((len(fresh), False, item_index))
        fresh.append(row)

    if repeated:
        dedup_refuse(items, repeated)
    backlog_make_room(fresh, topics, now=now)
    # A message handed to a waiting pull is stored leased to it; the answer still says NEW,
    # the state the produce gave it, as for every other fresh message.
    ids = insert_values(Message, handoff.lease(fresh, now) if handoff is not None else fresh, return_ids=True)
    skipped_record(skipped)
    results = [
        step if isinstance(step, ProduceResult)
        else ProduceResult(ids[step[0]], fresh[step[0]].topic, fresh[step[0]].group_name, Status.NEW, step[1], step[2])
        for step in plan
    ]
    if not handoff:
        return results, Counter((r.topic, r.group_name) for r in fresh)
    handoff.ids = ids
    return results, Counter((r.topic, r.group_name) for i, r in enumerate(fresh) if not handoff.handed(i))


def _count(results: list[ProduceResult]) -> None:
    counts: Counter[tuple[bool, str]] = Counter((r.duplicate, r.topic) for r in results)
    for (duplicate, topic), count in counts.items():
        (metrics.duplicates if duplicate else metrics.produced).labels(topic).inc(count)


def _message_row(
    item: ProduceItem, topic: Topic, group: str, now: datetime, producer: str, publish_id: int | None,
) -> NewMessage:
    if item.effect_time is not None:
        effect_time = item.effect_time
    elif item.delay_seconds:
        effect_time = now + timedelta(seconds=item.delay_seconds)
    else:
        effect_time = now
    return NewMessage(
        topic=topic.name, group_name=group, data=item.data, key=item.key, headers=item.headers,
        status=Status.NEW, effect_time=effect_time,
        retry_remaining=topic.retry_count if item.retry_count is None else item.retry_count, attempt=0,
        timeout_seconds=topic.timeout_seconds if item.timeout_seconds is None else item.timeout_seconds,
        dedup_key=item.dedup_key, last_log="", add_time=now, update_time=now, producer=producer,
        publish_id=publish_id, priority=item.priority,
        expires_at=_expires_at(item, topic, now, effect_time),
        tag=item.tag, batch_id=item.batch_id,
        dedup_until=now + timedelta(seconds=item.dedup_seconds) if item.dedup_seconds else None,
    )


def _expires_at(item: ProduceItem, topic: Topic, now: datetime, effect_time: datetime) -> datetime | None:
    """The item's own expiry, else its topic's default TTL counted from when it comes due."""
    if item.ttl_seconds:
        return now + timedelta(seconds=item.ttl_seconds)
    if item.expires_at is not None or topic.default_ttl_seconds is None:
        return item.expires_at
    return effect_time + timedelta(seconds=topic.default_ttl_seconds)


def _existing_by_dedup(rows: list[NewMessage]) -> dict[tuple[str, str, str], Message]:
    wanted = {(r.topic, r.group_name, r.dedup_key) for r in rows if r.dedup_key is not None}
    if not wanted:
        return {}
    found: dict[tuple[str, str, str], Message] = {}
    by_topic_group: dict[tuple[str, str], list[str]] = {}
    for topic, group, dedup in wanted:
        by_topic_group.setdefault((topic, group), []).append(dedup)  # type: ignore[arg-type]
    for (topic, group), keys in by_topic_group.items():
        for message in Message.objects.filter(topic=topic, group_name=group, dedup_key__in=keys).only(
            "id", "topic", "group_name", "status", "dedup_key", "dedup_until"
        ):
            found[(topic, group, message.dedup_key)] = message  # type: ignore[index]
    return found
