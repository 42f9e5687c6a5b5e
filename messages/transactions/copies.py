"""A committed publish goes to the groups subscribed when it commits.

A transactional publish is "produced" at its commit: its prepare stored one PREPARED copy
for each group subscribed then (or `default`), and the commit settles them against the
groups subscribed now, read under the topic's shared lock as a produce reads them (so a
group created or deleted meanwhile is ordered against the commit as against a produce):

- a PREPARED copy of a group still subscribed becomes NEW;
- a PREPARED copy of a group no longer subscribed (`default` once a group subscribed) is
  deleted, as a rollback deletes: it was never produced;
- a group subscribed since the prepare gets a new NEW copy of the publish, carrying
  `headers["mq-commit-copy-of"]` = the id of the copy it was made from. A replay of the
  group that started before the commit (a group created from `earliest` or a time) sees the
  publish PREPARED, or committed with this copy, and skips it: the group gets it once
  (messages/operations/replay.py).

A point-to-point message (produced to one named group, no `publish_id`) keeps its group.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime

from messages.delivery.sql_insert import NewMessage, insert_values
from messages.models import Message, MessageTrace, Status
from messages.operations.replay import COMMIT_COPY_OF
from messages.routing.filters import Subscription, copies_for, subscriptions_locked
from topics.models import Topic
from topics.services import DEFAULT_GROUP


def commit_settle(messages: list[Message], now: datetime) -> tuple[list[Message], list[int]]:
    """Settle a transaction's PREPARED rows (locked by the caller, in its transaction) against
    the subscriptions of now. Returns the PREPARED rows to commit and the ids of the copies
    inserted NEW for groups subscribed since; deletes the rows of groups no longer subscribed."""
    publishes: dict[tuple[str, int], list[Message]] = defaultdict(list)
    keep = [m for m in messages if m.publish_id is None]
    for message in messages:
        if message.publish_id is not None:
            publishes[(message.topic, message.publish_id)].append(message)
    if not publishes:
        return keep, []
    topics = {t.name: t for t in Topic.objects.filter(name__in={topic for topic, _ in publishes})}
    subscriptions: dict[str, list[Subscription]] = {}
    for name in sorted(topics):  # sorted: one lock order, as a produce
        subscriptions[name] = subscriptions_locked(topics[name].pk)
    dropped: list[int] = []
    fresh: list[NewMessage] = []
    for (topic, _publish_id), copies in publishes.items():
        wanted = _groups(subscriptions.get(topic), copies[0])
        have = {m.group_name for m in copies}
        keep += [m for m in copies if m.group_name in wanted]
        dropped += [m.id for m in copies if m.group_name not in wanted]
        fresh += [_copy(copies[0], group, now) for group in wanted if group not in have]
    if dropped:
        MessageTrace.objects.filter(message_id__in=dropped).delete()
        Message.objects.filter(id__in=dropped).delete()
    fresh = _without_stored_dedup(fresh)
    return keep, insert_values(Message, fresh, return_ids=True) if fresh else []


def _groups(subscriptions: list[Subscription] | None, source: Message) -> list[str]:
    """The groups the publish goes to now: the subscribed ones whose filter takes it, or
    `default` while nobody subscribes; none once its topic is gone. Skips are not counted
    again: the prepare counted them."""
    if subscriptions is None:
        return []
    if not subscriptions:
        return [DEFAULT_GROUP]
    headers = {k: v for k, v in (source.headers or {}).items() if k != COMMIT_COPY_OF}
    return copies_for(subscriptions, source.tag, headers, Counter())


def _copy(source: Message, group: str, now: datetime) -> NewMessage:
    return NewMessage(
        topic=source.topic, group_name=group, data=source.data, key=source.key,
        headers={**(source.headers or {}), COMMIT_COPY_OF: str(source.id)}, status=Status.NEW,
        effect_time=max(source.effect_time, now), retry_remaining=source.retry_remaining, attempt=0,
        timeout_seconds=source.timeout_seconds, dedup_key=source.dedup_key, last_log="", add_time=source.add_time,
        update_time=now, producer=source.producer, publish_id=source.publish_id, priority=source.priority,
        expires_at=source.expires_at, copied_at=now, tag=source.tag, dedup_until=source.dedup_until,
    )


def _without_stored_dedup(rows: list[NewMessage]) -> list[NewMessage]:
    """Leave out the copies whose dedup key the group already holds: for that group the
    publish is a duplicate, as it would have been at its produce."""
    keyed = [r for r in rows if r.dedup_key is not None]
    if not keyed:
        return rows
    stored: set[tuple[str, str, str | None]] = set()
    for row in keyed:
        if Message.objects.filter(topic=row.topic, group_name=row.group_name, dedup_key=row.dedup_key).exists():
            stored.add((row.topic, row.group_name, row.dedup_key))
    return [r for r in rows if (r.topic, r.group_name, r.dedup_key) not in stored]
