"""Queue mode: any consumer of the group takes any deliverable message, many in flight."""

from __future__ import annotations

from datetime import datetime

from messages import sql
from messages.models import Message
from messages.services import lifecycle
from mqcenter.core.db import retry_on_lock_conflict


@retry_on_lock_conflict
def claim_queue(
    topic: str, group: str, *, consumer: str, rank: tuple[int | None, int | None], limit: int, now: datetime
) -> list[Message]:
    """The group's oldest deliverable messages in (effect_time, id) order, skipping rows
    other claimers hold."""
    with sql.short_transaction():
        rows = sql.claimable_rows(topic, group, now, limit, lock=True)
        return lifecycle.lease(rows, consumer=consumer, rank=rank, now=now) if rows else []
