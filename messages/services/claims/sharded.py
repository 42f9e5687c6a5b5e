"""Sharded mode: messages of one key run one at a time in id order; keys run in parallel
(messages without a key behave as in queue mode)."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Min

from messages import sql
from messages.models import Message, Status
from messages.services import lifecycle
from mqcenter.core.db import retry_on_lock_conflict

# Look this many times further down the backlog than asked, for keys that are free.
SHARD_LOOKAHEAD = 4


@retry_on_lock_conflict
def claim_sharded(
    group_pk: int, topic: str, group: str, *, consumer: str, rank: tuple[int | None, int | None], limit: int,
    now: datetime,
) -> list[Message]:
    """Deliverable messages whose key has nothing running and nothing earlier waiting."""
    scope = {"topic": topic, "group_name": group}
    with sql.short_transaction():
        sql.lock_group(group_pk)
        candidates = sql.claimable_rows(topic, group, now, limit * SHARD_LOOKAHEAD, lock=False)
        keys = {m.key for m in candidates if m.key is not None}
        busy = set(
            Message.objects.filter(key__in=keys, **scope, status=Status.RUNNING).values_list("key", flat=True)
        ) if keys else set()
        heads = dict(
            Message.objects.filter(key__in=keys, **scope, status=Status.NEW)
            .values("key").annotate(head=Min("id")).values_list("key", "head")
        ) if keys else {}
        chosen: list[Message] = []
        for message in candidates:
            if message.key is not None:
                if message.key in busy or heads.get(message.key) != message.id:
                    continue
                busy.add(message.key)
            chosen.append(message)
            if len(chosen) == limit:
                break
        return lifecycle.lease(chosen, consumer=consumer, rank=rank, now=now) if chosen else []
