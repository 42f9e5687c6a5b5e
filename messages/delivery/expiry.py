"""Expiry: a NEW message whose `expires_at` passed becomes EXPIRED, a dead letter, instead of
being delivered late. Claims expire the rows they meet (`claimed_live`); the maintenance sweep
(`messages_expire`) takes the rest in bounded batches, so an idle group's expired messages do
not wait for a consumer to become dead letters.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from messages.batches.progress import batches_finished
from messages.delivery import sql
from messages.delivery.trace import trace_row, trace_write
from messages.models import Message, Status, TraceEvent
from messages.stats.live import live_moved
from mqcenter.core import metrics

EXPIRED_LOG = "expired: not delivered before its expires_at"
# A claim that met expired rows looks again this many times for live ones.
CLAIM_ROUNDS = 3
SWEEP_BATCH = 500
SWEEP_MAX_BATCHES = 20


def is_expired(message: Message, now: datetime) -> bool:
    return message.expires_at is not None and message.expires_at <= now


def expire(ids: list[int], *, now: datetime, actor: str) -> int:
    """Make these messages EXPIRED if they are still NEW and past their expiry, each with a
    `dead` trace row giving the reason. Locks them inside the caller's transaction, skipping
    rows another transaction holds (that one decides about them). Returns how many."""
    if not ids:
        return 0
    rows = sql.expirable_locked(ids, now)
    if not rows:
        return 0
    Message.objects.filter(id__in=[m.id for m in rows]).update(
        status=Status.EXPIRED,
        update_time=now,
        last_log=EXPIRED_LOG,
        lease_owner=None,
        lease_expires_at=None,
    )
    for message in rows:
        message.status = Status.EXPIRED
    trace_write(
        trace_row(
            m,
            TraceEvent.DEAD,
            at=now,
            actor=actor,
            log=f"expired: not delivered before {m.expires_at.isoformat()}",
        )  # type: ignore[union-attr]
        for m in rows
    )
    batches_finished(rows, now=now)
    metrics.expired.inc(len(rows))
    live_moved((m.topic, m.group_name, Status.NEW, Status.EXPIRED) for m in rows)
    return len(rows)


def claimed_live(read: Callable[[], list[Message]], *, now: datetime) -> tuple[list[Message], bool]:
    """The rows `read` (a claim's query, inside its transaction) answers, none expired: the
    expired ones it meets are made EXPIRED and the query runs again, a few rounds at most.
    Also answers whether expired rows were still met in the last round (the claim should
    then look again at once rather than wait)."""
    rows = read()
    for _ in range(CLAIM_ROUNDS):
        expired = [m.id for m in rows if is_expired(m, now)]
        if not expired:
            return rows, False
        expire(expired, now=now, actor="broker")
        rows = read()
    live = [m for m in rows if not is_expired(m, now)]
    return live, len(live) < len(rows)


def messages_expire(
    *, batch: int = SWEEP_BATCH, max_batches: int = SWEEP_MAX_BATCHES
) -> dict[str, Any]:
    """The maintenance sweep: NEW messages past their expiry become EXPIRED, `batch` at a
    time (each its own short transaction) along `ix_msg_expiry`, at most `max_batches`
    batches a run. Safe to run in several workers at once (SKIP LOCKED)."""
    total = 0
    for _ in range(max_batches):
        now = timezone.now()
        ids = sql.expired_ids(now, batch)
        if not ids:
            break
        with transaction.atomic():
            total += expire(ids, now=now, actor="maintenance")
        if len(ids) < batch:
            break
    return {"expired": total}
