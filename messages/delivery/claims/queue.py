"""Queue mode: any consumer of the group takes any deliverable message, many in flight."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.conf import settings

from messages.delivery import expiry, lifecycle, sql
from messages.delivery.claims.aging import queue_claimable_rows
from messages.delivery.claims.fair import FairPick, fair_advance, fair_cursor_locked
from messages.delivery.claims.gate import Claim, gate_open, gate_spend
from mqcenter.core.db import retry_on_lock_conflict
from topics.models import DeliveryMode


def plain_queue(topic_row: Any, topic_group: Any) -> bool:
    """Whether a claim of this group (of this topic, as the topic cache holds them) takes
    its messages without deciding anything under the group's row lock: a subscribed
    queue-mode group without flow control or fair keys, neither it nor its topic paused.
    Only such groups are claimed for several pulls at once (`delivery/pull_many.py`) or
    handed messages by a produce (`delivery/handoff.py`). A fair group's claim reads and
    advances its cursor under that lock (claims/fair.py), a gated one spends its budget
    there (claims/gate.py); a group not subscribed yet is subscribed by a pull's claim."""
    return (
        topic_row is not None and topic_group is not None
        and (topic_group.subscribed or not settings.MQ_AUTO_CREATE_GROUPS)
        and not topic_row.paused and not topic_group.paused
        and topic_group.mode == DeliveryMode.QUEUE and not topic_group.flow_controlled
        and not topic_group.fair_keys
    )


@retry_on_lock_conflict
def claim_queue(
    group_pk: int, topic: str, group: str, *, consumer: str, rank: tuple[int | None, int | None], limit: int,
    now: datetime, gated: bool, fair: bool = False, before: Callable[[], object] | None = None,
) -> Claim:
    """The group's deliverable messages, highest priority first and then in (effect_time, id)
    order (or by aged priority: claims/aging.py), skipping rows other claimers hold; expired
    ones become EXPIRED instead. `gated`: the group has flow control, decided under its row lock.
    `fair`: round-robin over message keys from the cursor on the group's row (claims/fair.py)."""
    with sql.short_transaction():
        if before is not None:
            before()
        gate = gate_open(group_pk, topic, group, limit=limit, now=now) if gated else None
        if gate is not None and gate.limit == 0:
            return Claim([], gate.retry_at)
        take = gate.limit if gate else limit
        pick = FairPick(topic, group, now, take, fair_cursor_locked(group_pk)) if fair else None
        if pick is not None:
            rows, more = expiry.claimed_live(pick.rows, now=now)
        else:
            rows, more = expiry.claimed_live(lambda: queue_claimable_rows(topic, group, now, take), now=now)
        leased = lifecycle.lease(rows, consumer=consumer, rank=rank, now=now) if rows else []
        if pick is not None:
            position = {m.id: index for index, m in enumerate(rows)}
            leased.sort(key=lambda m: position[m.id])  # handed over in claim order
            fair_advance(group_pk, pick.cursor_after(leased))
        else:
            leased.sort(key=lambda m: (-m.priority, m.effect_time, m.id))  # handed over in claim order
        if gate is not None:
            gate_spend(group_pk, gate, len(leased), now)
        return Claim(leased, now if more and not leased else None)  # expired rows ahead: look again now
