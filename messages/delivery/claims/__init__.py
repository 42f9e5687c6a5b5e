"""Claims: lease a consumer's next messages of one (topic, group), one module per delivery
mode (queue, serial, sharded). A claim is one short transaction; nothing waits holding a lock.

Locking (MySQL/MariaDB at READ COMMITTED, PostgreSQL; SQLite serializes writers):
- `queue` takes rows with `SELECT ... FOR UPDATE SKIP LOCKED`: concurrent claimers skip each
  other's rows instead of waiting, and never see the same row.
- `serial` and `sharded` first lock their group's row in `topics_topicgroup`, so the "who is
  first / which key is free" decision is made by one claimer at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from messages.delivery import sql
from messages.delivery.claims.gate import Claim
from messages.delivery.claims.queue import claim_queue
from messages.delivery.claims.serial import claim_serial
from messages.delivery.claims.sharded import claim_sharded
from messages.models import Status
from messages.stats.live import live_moved
from mqcenter.core.auth import Principal
from registry.services import rank_cache
from topics.cache import topic_cache
from topics.models import DeliveryMode
from topics.services import group_pull_record, group_subscribe

__all__ = ["Claim", "messages_claim"]


def messages_claim(
    *, principal: Principal, topic: str, group: str, consumer: str, max_messages: int,
    before: Callable[[], object] | None = None,
) -> Claim:
    """One claim attempt for `consumer`: up to `max_messages` deliverable messages leased to
    it. NotFound for a group the topic lacks when groups are not created on demand. A topic
    of another business line answers as a missing one: nothing to claim. `before` runs
    first inside the claim's transaction (a pull's acks), unless the claim ends before one
    (a missing or paused topic)."""
    topic_row = topic_cache.get(topic)
    if topic_row is None or not principal.may_biz(topic_row.biz_id):
        return Claim([], None)  # consumers may start before anyone produced
    now = timezone.now()
    topic_group = topic_row.group_rows.get(group)  # type: ignore[attr-defined]
    if topic_group is None or (not topic_group.subscribed and settings.MQ_AUTO_CREATE_GROUPS):
        topic_group = group_subscribe(topic=topic_row, name=group)  # a consumer subscribes its group
        topic_row.group_rows[group] = topic_group  # type: ignore[attr-defined]
    if topic_row.paused or topic_group.paused:
        # Look again once this process's view of the topic may have changed: a resume wakes
        # waiting pulls, but another process's cache may still say paused for that long.
        return Claim([], now + timedelta(seconds=settings.MQ_TOPIC_CACHE_SECONDS))
    group_pull_record(topic_group, now)
    rank = rank_cache.rank(consumer, topic, group)
    if topic_group.mode == DeliveryMode.SERIAL:
        claim = claim_serial(topic_group.pk, topic, group, consumer=consumer, rank=rank, now=now, before=before)
    elif topic_group.mode == DeliveryMode.SHARDED:
        claim = claim_sharded(topic_group.pk, topic, group, consumer=consumer, rank=rank, limit=max_messages, now=now,
                              before=before)
    else:
        claim = claim_queue(topic_group.pk, topic, group, consumer=consumer, rank=rank, limit=max_messages, now=now,
                            gated=topic_group.flow_controlled, fair=topic_group.fair_keys, before=before)
    if claim.messages:
        live_moved((topic, group, Status.NEW, Status.RUNNING) for _ in claim.messages)
        return claim
    due = sql.next_due(topic, group, now)
    return Claim([], min(d for d in (due, claim.next_due) if d is not None) if due or claim.next_due else None)
