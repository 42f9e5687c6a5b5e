"""Serial mode: the group processes one message at a time, in id order."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from messages.delivery import expiry, lifecycle, sql
from messages.delivery.claims.gate import Claim, gate_open, gate_spend
from messages.models import Message, Status
from mqcenter.core.db import retry_on_lock_conflict


@retry_on_lock_conflict
def claim_serial(
    group_pk: int, topic: str, group: str, *, consumer: str, rank: tuple[int | None, int | None], now: datetime,
    before: Callable[[], object] | None = None,
) -> Claim:
    """The group's lowest-id unfinished message, once nothing of the group is running; an
    expired head becomes EXPIRED and the next one is the head."""
    with sql.short_transaction():
        if before is not None:
            before()
        gate = gate_open(group_pk, topic, group, limit=1, now=now)
        if gate.limit == 0:
            return Claim([], gate.retry_at)
        if sql.group_head(topic, group, Status.RUNNING) is not None:
            return Claim([], None)
        heads, more = expiry.claimed_live(lambda: _heads(topic, group), now=now)
        head = heads[0] if heads else None
        if more:
            return Claim([], now)  # expired heads are still ahead: look again at once
        if head is None or head.effect_time > now:
            return Claim([], None)  # an earlier message waits for its retry: order beats throughput
        leased = lifecycle.lease([head], consumer=consumer, rank=rank, now=now)
        gate_spend(group_pk, gate, len(leased), now)
        return Claim(leased, None)


def _heads(topic: str, group: str) -> list[Message]:
    head = sql.group_head(topic, group, Status.NEW)
    return [head] if head is not None else []
