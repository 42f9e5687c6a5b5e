"""Serial mode: the group processes one message at a time, in id order."""

from __future__ import annotations

from datetime import datetime

from messages import sql
from messages.models import Message, Status
from messages.services import lifecycle
from mqcenter.core.db import retry_on_lock_conflict


@retry_on_lock_conflict
def claim_serial(
    group_pk: int, topic: str, group: str, *, consumer: str, rank: tuple[int | None, int | None], now: datetime
) -> list[Message]:
    """The group's lowest-id unfinished message, once nothing of the group is running."""
    with sql.short_transaction():
        sql.lock_group(group_pk)
        if sql.group_head(topic, group, Status.RUNNING) is not None:
            return []
        head = sql.group_head(topic, group, Status.NEW)
        if head is None or head.effect_time > now:
            return []  # an earlier message waits for its retry: order beats throughput
        return lifecycle.lease([head], consumer=consumer, rank=rank, now=now)
