"""The registry: consumer heartbeats with rank/total, and broker nodes."""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from mqcenter.core.auth import Principal
from mqcenter.core.errors import Forbidden, InvalidRequest
from registry.models import BrokerNode, ConsumerInstance
from topics.services import group_subscribe, topics_for_produce

MISSED_HEARTBEATS = 3
MAX_SUBSCRIPTIONS = 100


def online_cutoff(now: datetime | None = None) -> datetime:
    """Anything that last heartbeat before this has missed three heartbeats: it is gone."""
    return (now or timezone.now()) - timedelta(seconds=MISSED_HEARTBEATS * settings.MQ_HEARTBEAT_SECONDS)


@dataclass(frozen=True)
class Placement:
    topic: str
    group: str
    mode: str
    rank: int
    total: int


def consumer_heartbeat(
    *, principal: Principal, consumer: str, subscriptions: list[tuple[str, str]], host: str = ""
) -> list[Placement]:
    """Record that `consumer` is alive on these (topic, group) pairs; answer its rank/total.

    The subscriptions replace the consumer's previous ones. Topics (when auto-creation is
    allowed) and groups a consumer names are added, so producers can broadcast to them.
    """
    if len(subscriptions) > MAX_SUBSCRIPTIONS:
        raise InvalidRequest(f"At most {MAX_SUBSCRIPTIONS} subscriptions.", details={"field": "subscriptions"})
    for index, (topic, _group) in enumerate(subscriptions):
        if not principal.may("consume", topic):
            raise Forbidden(
                f"This token has no consume scope for topic {topic!r}.",
                details={"field": f"subscriptions[{index}].topic", "topic": topic},
            )
    now = timezone.now()
    with transaction.atomic():
        topics = topics_for_produce(
            principal=principal,
            names={topic for topic, _ in subscriptions},
            auto_create=settings.MQ_AUTO_CREATE_TOPICS,
        )
        modes = {}
        for topic_name, group in sorted(subscriptions):  # one lock order: topics are locked to add groups
            modes[(topic_name, group)] = group_subscribe(topic=topics[topic_name], name=group).mode
        wanted = set(subscriptions)
        existing = list(_of_lines(principal, ConsumerInstance.objects.filter(consumer=consumer)).only("topic", "group_name"))
        _require_own(principal, {row.topic for row in existing})
        dropped = [row.pk for row in existing if (row.topic, row.group_name) not in wanted]
        if dropped:
            ConsumerInstance.objects.filter(pk__in=dropped).delete()
        ConsumerInstance.objects.bulk_create(
            [
                ConsumerInstance(
                    consumer=consumer, topic=topic, group_name=group, host=host[:200],
                    started_at=now, last_heartbeat=now,
                )
                for topic, group in subscriptions
            ],
            update_conflicts=True,
            # MySQL/MariaDB upsert on any unique key (ON DUPLICATE KEY UPDATE) and refuse
            # a conflict target; PostgreSQL and SQLite need one.
            unique_fields=(
                ["consumer", "topic", "group_name"]
                if connection.features.supports_update_conflicts_with_target
                else None
            ),
            update_fields=["last_heartbeat", "host"],
        )
    return [
        Placement(topic, group, modes[(topic, group)], *consumer_rank(consumer, topic, group))
        for topic, group in subscriptions
    ]


def consumer_rank(consumer: str, topic: str, group: str) -> tuple[int, int]:
    """(rank, total) of a consumer among the online consumers of a (topic, group)."""
    online = consumers_online_ids(topic, group)
    total = len(online)
    rank = online.index(consumer) if consumer in online else total
    return rank, max(total, rank + 1)


def consumers_online_ids(topic: str, group: str) -> list[str]:
    return list(
        ConsumerInstance.objects.filter(
            topic=topic, group_name=group, last_heartbeat__gte=online_cutoff()
        )
        .order_by("consumer")
        .values_list("consumer", flat=True)
    )


class _RankCache:
    """Pull traces record rank/total; reading the registry once a second per group is plenty.
    Each group's online consumers are kept as consumer -> rank: a produce that hands a
    thousand waiting pulls their messages looks up a thousand consumers."""

    def __init__(self, ttl: float = 1.0) -> None:
        self.ttl = ttl
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], tuple[float, dict[str, int]]] = {}

    def rank(self, consumer: str, topic: str, group: str) -> tuple[int | None, int | None]:
        key = (topic, group)
        with self._lock:
            hit = self._entries.get(key)
        if hit is None or hit[0] < time.monotonic():
            ranks = {name: rank for rank, name in enumerate(consumers_online_ids(topic, group))}
            with self._lock:
                self._entries[key] = (time.monotonic() + self.ttl, ranks)
        else:
            ranks = hit[1]
        return ranks.get(consumer), len(ranks) or None


rank_cache = _RankCache()


def consumer_leave(*, principal: Principal, consumer: str) -> int:
    """Remove a consumer's subscriptions (graceful shutdown). Returns how many went."""
    rows = _of_lines(principal, ConsumerInstance.objects.filter(consumer=consumer))
    _require_own(principal, set(rows.values_list("topic", flat=True)))
    deleted, _ = rows.delete()
    return deleted


def _of_lines(principal: Principal, rows: Any) -> Any:
    """`rows` (consumer entries) on topics of the business lines `principal` reaches.

    A consumer id is scoped by business line: two lines may each run a consumer "worker-1",
    and neither sees, replaces or removes the other's entries (nor learns they exist)."""
    if principal.biz_ids is None:
        return rows
    from topics.models import Topic

    return rows.filter(topic__in=Topic.objects.filter(biz_id__in=principal.biz_ids).values("name"))


def _require_own(principal: Principal, topics: set[str]) -> None:
    """Within its business line, a consumer id's entries are changed only by a token that may
    consume all of their topics."""
    for topic in sorted(topics):
        if not principal.may("consume", topic):
            raise Forbidden(f"Consumer entries on topic {topic!r} belong to another token's reach.",
                            details={"field": "consumer"})


def consumers_online(*, principal: Principal, topic: str | None = None, group: str | None = None) -> list[dict[str, Any]]:
    """Online consumers (optionally of one topic/group) with rank/total, visible to the caller."""
    rows = ConsumerInstance.objects.filter(last_heartbeat__gte=online_cutoff())
    if topic:
        rows = rows.filter(topic=topic)
    if group:
        rows = rows.filter(group_name=group)
    if principal.biz_ids is not None:  # a business line's admins and operators see only its topics
        from topics.models import Topic

        rows = rows.filter(topic__in=Topic.objects.filter(biz_id__in=principal.biz_ids).values("name"))
    rows = rows.order_by("topic", "group_name", "consumer")
    visible = [r for r in rows[:5000] if principal.may("consume", r.topic)]
    totals: dict[tuple[str, str], int] = {}
    for r in visible:
        totals[(r.topic, r.group_name)] = totals.get((r.topic, r.group_name), 0) + 1
    ranks: dict[tuple[str, str], int] = {}
    result = []
    for r in visible:
        pair = (r.topic, r.group_name)
        rank = ranks.get(pair, 0)
        ranks[pair] = rank + 1
        result.append({
            "consumer": r.consumer, "topic": r.topic, "group": r.group_name, "host": r.host,
            "rank": rank, "total": totals[pair], "started_at": r.started_at,
            "last_heartbeat": r.last_heartbeat,
        })
    return result


def registry_prune(*, now: datetime | None = None) -> dict[str, int]:
    """Drop consumers and brokers that stopped heartbeating (bounded, idempotent)."""
    cutoff = online_cutoff(now) - timedelta(minutes=10)
    consumers, _ = ConsumerInstance.objects.filter(last_heartbeat__lt=cutoff).delete()
    brokers, _ = BrokerNode.objects.filter(last_heartbeat__lt=cutoff).delete()
    return {"consumers": consumers, "brokers": brokers}


# --- broker nodes ------------------------------------------------------------------------


def broker_identity(url: str) -> dict[str, Any]:
    host = socket.gethostname()
    return {"node_id": f"{host}:{os.getpid()}:{url}", "url": url, "host": host, "pid": os.getpid()}


def broker_heartbeat(*, node_id: str, url: str, host: str, pid: int, waiting_pulls: int = 0) -> None:
    """This broker process is alive, with `waiting_pulls` long-polls waiting in it."""
    now = timezone.now()
    values = {"url": url, "host": host, "pid": pid, "last_heartbeat": now, "waiting_pulls": waiting_pulls}
    # One autocommitted UPDATE per beat (every MQ_LEASE_RECOVERY_SECONDS, 0.2 s under the bench); the
    # first beat, or one after the row was removed, creates it.
    if not BrokerNode.objects.filter(node_id=node_id).update(**values):
        BrokerNode.objects.update_or_create(node_id=node_id, defaults=values,
                                            create_defaults={**values, "started_at": now})


def broker_leave(*, node_id: str) -> None:
    BrokerNode.objects.filter(node_id=node_id).delete()


def brokers_online() -> list[BrokerNode]:
    return list(BrokerNode.objects.filter(last_heartbeat__gte=online_cutoff()).order_by("url"))


def broker_urls() -> list[str]:
    return sorted({node.url for node in brokers_online()})


