"""Sharded mode: messages of one key run in id order, at most the group's
`key_concurrency` of them at once (1: strictly one after another); keys run in parallel
(messages without a key behave as in queue mode)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import datetime

from messages.delivery import expiry, lifecycle, sql
from messages.delivery.claims.gate import Claim, gate_open, gate_spend
from messages.models import Message, Status
from mqcenter.core.db import retry_on_lock_conflict

# Look this many times further down the backlog than asked, for keys that are free.
SHARD_LOOKAHEAD = 4


@retry_on_lock_conflict
def claim_sharded(
    group_pk: int, topic: str, group: str, *, consumer: str, rank: tuple[int | None, int | None], limit: int,
    now: datetime, before: Callable[[], object] | None = None,
) -> Claim:
    """Deliverable messages whose key has a free slot and, one at a time per key, nothing
    earlier waiting."""
    with sql.short_transaction():
        if before is not None:
            before()
        gate = gate_open(group_pk, topic, group, limit=limit, now=now)
        if gate.limit == 0:
            return Claim([], gate.retry_at)
        per_key = gate.flow.key_concurrency if gate.flow is not None else 1
        # Expired rows become EXPIRED first, so a key's head is never an expired message.
        candidates, more = expiry.claimed_live(
            lambda: sql.due_in_time_order(topic, group, now, gate.limit * SHARD_LOOKAHEAD), now=now
        )
        keys = {m.key for m in candidates if m.key is not None}
        running: Counter[str] = Counter(sql.per_key(topic, group, keys, Status.RUNNING, head=False))
        heads = sql.per_key(topic, group, keys, Status.NEW, head=True) if per_key == 1 else {}
        chosen: list[Message] = []
        for message in candidates:  # in (effect_time, id) order
            if message.key is not None:
                if running[message.key] >= per_key or (per_key == 1 and heads.get(message.key) != message.id):
                    continue
                running[message.key] += 1
            chosen.append(message)
            if len(chosen) == gate.limit:
                break
        leased = lifecycle.lease(chosen, consumer=consumer, rank=rank, now=now) if chosen else []
        gate_spend(group_pk, gate, len(leased), now)
        return Claim(leased, now if more and not leased else None)  # expired rows ahead: look again now
