"""Serial mode: the group processes one message at a time, in id order."""

from __future__ import annotations

from datetime import datetime

from messages import sql
from messages.models import Status
from messages.services import lifecycle
from messages.services.claims.gate import Claim, gate_open, gate_spend
from mqcenter.core.db import retry_on_lock_conflict


@retry_on_lock_conflict
def claim_serial(
    group_pk: int, topic: str, group: str, *, consumer: str, rank: tuple[int | None, int | None], now: datetime
) -> Claim:
    """The group's lowest-id unfinished message, once nothing of the group is running."""
    with sql.short_transaction():
        gate = gate_open(group_pk, topic, group, limit=1, now=now)
        if gate.limit == 0:
            return Claim([], gate.retry_at)
        if sql.group_head(topic, group, Status.RUNNING) is not None:
            return Claim([], None)
        head = sql.group_head(topic, group, Status.NEW)
        if head is None or head.effect_time > now:
            return Claim([], None)  # an earlier message waits for its retry: order beats throughput
        leased = lifecycle.lease([head], consumer=consumer, rank=rank, now=now)
        gate_spend(group_pk, gate, len(leased), now)
        return Claim(leased, None)
