"""Produce: store a batch of messages durably, all or nothing, before anyone is told."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from messages.models import Message, Status, TraceEvent
from messages.services.trace import trace_row, trace_write
from messages.sql import insert_rows
from mqcenter import metrics
from mqcenter.auth import Principal
from mqcenter.db import retry_on_lock_conflict
from mqcenter.errors import Forbidden, InvalidRequest
from registry.wakeups import wakeup_hub
from topics.models import Topic
from topics.services import DEFAULT_GROUP, groups_ensure, topic_broadcast_groups, topics_for_produce

# Two identical produces racing on a dedup_key: the loser's insert fails on the unique
# index; the whole batch is retried once and then finds the winner's row.
DEDUP_RACE_RETRIES = 2


@dataclass(frozen=True)
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
    broadcast: bool = False


@dataclass(frozen=True)
class ProduceResult:
    id: int
    topic: str
    group: str
    status: str
    duplicate: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "topic": self.topic,
            "group": self.group,
            "status": self.status,
            "duplicate": self.duplicate,
        }


@retry_on_lock_conflict
def messages_produce(*, principal: Principal, items: list[ProduceItem]) -> list[ProduceResult]:
    """Store every item (one copy per group for broadcasts) in one transaction.

    Returns only after the commit, so a 201 means the messages are durable. A repeated
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
    for attempt in range(DEDUP_RACE_RETRIES + 1):
        try:
            with transaction.atomic():
                results, woken = _store(principal, items)
                transaction.on_commit(lambda pairs=woken: wakeup_hub().publish(pairs))
            _count(results)
            return results
        except IntegrityError:
            if attempt == DEDUP_RACE_RETRIES:
                raise
    raise AssertionError("unreachable")


def _store(principal: Principal, items: list[ProduceItem]) -> tuple[list[ProduceResult], set[tuple[str, str]]]:
    topics = topics_for_produce(
        principal=principal,
        names={item.topic for item in items},
        auto_create=settings.MQ_AUTO_CREATE_TOPICS,
    )
    now = timezone.now()
    rows: list[Message] = []
    for item in items:
        topic = topics[item.topic]
        groups = topic_broadcast_groups(topic) if item.broadcast else [item.group or DEFAULT_GROUP]
        rows.extend(_message_row(item, topic, group, now) for group in groups)

    for topic in topics.values():
        groups_ensure(topic=topic, names={r.group_name for r in rows if r.topic == topic.name})

    existing = _existing_by_dedup(rows)
    entries: list[tuple[Message, bool]] = []  # (message, duplicate)
    new_rows: list[Message] = []
    for row in rows:
        if row.dedup_key is not None:
            dedup = (row.topic, row.group_name, row.dedup_key)
            if dedup in existing:
                entries.append((existing[dedup], True))
                continue
            existing[dedup] = row  # a later copy in this batch is a duplicate of this one
        new_rows.append(row)
        entries.append((row, False))

    _insert(new_rows)  # sets ids, also on rows that in-batch duplicates point at
    trace_write(
        trace_row(row, TraceEvent.PRODUCED, at=now, actor=principal.name) for row in new_rows
    )
    results = [
        ProduceResult(m.id, m.topic, m.group_name, m.status, duplicate) for m, duplicate in entries
    ]
    return results, {(r.topic, r.group_name) for r in new_rows}


def _count(results: list[ProduceResult]) -> None:
    for result in results:
        (metrics.duplicates if result.duplicate else metrics.produced).labels(result.topic).inc()


def _message_row(item: ProduceItem, topic: Topic, group: str, now: datetime) -> Message:
    if item.effect_time is not None:
        effect_time = item.effect_time
    elif item.delay_seconds:
        effect_time = now + timedelta(seconds=item.delay_seconds)
    else:
        effect_time = now
    return Message(
        topic=topic.name,
        group_name=group,
        data=item.data,
        key=item.key,
        headers=item.headers,
        status=Status.NEW,
        effect_time=effect_time,
        retry_remaining=topic.retry_count if item.retry_count is None else item.retry_count,
        attempt=0,
        timeout_seconds=topic.timeout_seconds if item.timeout_seconds is None else item.timeout_seconds,
        dedup_key=item.dedup_key,
        add_time=now,
        update_time=now,
    )


def _existing_by_dedup(rows: list[Message]) -> dict[tuple[str, str, str | None], Message]:
    wanted = {(r.topic, r.group_name, r.dedup_key) for r in rows if r.dedup_key is not None}
    if not wanted:
        return {}
    found: dict[tuple[str, str, str | None], Message] = {}
    by_topic_group: dict[tuple[str, str], list[str]] = {}
    for topic, group, dedup in wanted:
        by_topic_group.setdefault((topic, group), []).append(dedup)  # type: ignore[arg-type]
    for (topic, group), keys in by_topic_group.items():
        for message in Message.objects.filter(topic=topic, group_name=group, dedup_key__in=keys).only(
            "id", "topic", "group_name", "status", "dedup_key"
        ):
            found[(topic, group, message.dedup_key)] = message
    return found


def _insert(rows: list[Message]) -> None:
    """Insert rows and learn their ids (one statement per chunk where the backend allows)."""
    insert_rows(Message, rows, return_ids=True)
