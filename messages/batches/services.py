"""Batches with a completion callback: messages produced together under one `batch_id`; when
every member (every copy of its publishes) has finished — SUCCESS, dead, EXPIRED or
CANCELLED — exactly one message is produced to the batch's `callback_topic`.

A member's finish is counted in the transaction that finishes it (`batches_finished`, called
by each place a message finishes): one UPDATE of its batch row, which locks the row until
that transaction commits. So two members finishing at once on two brokers take turns on the
row, and only the transaction that takes `pending` to zero sees zero: it stamps
`completed_at` and stores the callback, in that same transaction. Messages without a batch
cost nothing but the check of a column already read.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from messages.batches.models import Batch
from messages.batches.progress import batch_complete
from messages.delivery.produce import ProduceItem, ProduceResult, messages_produce
from mqcenter.core.auth import Principal
from mqcenter.core.errors import Conflict, Forbidden, InvalidRequest, NotFound
from topics.services import topics_for_produce

BATCH_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-")


def batch_id_check(value: Any) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= 64 or not set(value) <= BATCH_ID_CHARS:
        raise InvalidRequest("batch_id must be 1-64 letters, digits and _.:-.", details={"field": "batch_id"})
    return value


def batch_create(*, principal: Principal, items: list[ProduceItem], callback_topic: Any,
                 batch_id: Any = None) -> tuple[Batch, list[ProduceResult]]:
    """Store the batch row and its messages in one transaction, all or nothing. The batch
    counts every stored copy; a message answered as a duplicate of one stored earlier is not
    a member. 409 when the batch id is taken."""
    from messages.delivery.validation import name

    callback = name(callback_topic, "callback_topic")
    if not principal.may("produce", callback):
        raise Forbidden(f"This token has no produce scope for topic {callback!r}.",
                        details={"field": "callback_topic", "topic": callback})
    ident = uuid.uuid4().hex if batch_id is None else batch_id_check(batch_id)
    for item in items:
        item.batch_id = ident
    now = timezone.now()
    try:
        with transaction.atomic():
            # The callback topic as a produce to it would find it (or create it, when allowed).
            topics_for_produce(principal=principal, names={callback}, auto_create=settings.MQ_AUTO_CREATE_TOPICS)
            batch = Batch.objects.create(id=ident, biz_id=principal.home_biz_id, producer=principal.name[:200],
                                         callback_topic=callback, created_at=now)
            results = messages_produce(principal=principal, items=items)
            members = sum(1 for r in results if not r.duplicate)
            batch.total = batch.pending = members
            batch.save(update_fields=["total", "pending"])
            if members == 0:  # nothing to wait for: complete at once
                batch_complete(batch, now)
    except IntegrityError as exc:
        if Batch.objects.filter(id=ident).exists():
            raise Conflict(f"Batch {ident} already exists.", details={"field": "batch_id", "batch_id": ident}) from exc
        raise
    return batch, results


def batch_get(*, principal: Principal, batch_id: str) -> Batch:
    """The batch if `principal` may produce to its callback topic: 404 outside its business
    line, 403 within it without that scope (as a transaction)."""
    batch = Batch.objects.filter(id=batch_id).first()
    if batch is None or not principal.may_biz(batch.biz_id):
        raise NotFound(f"Batch {batch_id} does not exist.", details={"batch_id": batch_id})
    principal.require("produce", batch.callback_topic)
    return batch


def batch_answer(batch: Batch) -> dict[str, Any]:
    return {"batch_id": batch.id, "callback_topic": batch.callback_topic, "total": batch.total,
            "pending": batch.pending, "success": batch.success, "dead": batch.dead, "expired": batch.expired,
            "cancelled": batch.cancelled, "created_at": batch.created_at, "completed_at": batch.completed_at,
            "callback_message_id": batch.callback_message_id}


def batches_purge(*, now: datetime, limit: int = 10_000) -> int:
    """Completed batches older than MQ_ARCHIVE_RETENTION_DAYS (as long as their messages'
    archive is kept) are deleted, `limit` at most a run. Returns how many."""
    cutoff = now - timedelta(days=settings.MQ_ARCHIVE_RETENTION_DAYS)
    ids = list(Batch.objects.filter(completed_at__lt=cutoff).order_by("completed_at").values_list("id", flat=True)[:limit])
    return Batch.objects.filter(id__in=ids).delete()[0] if ids else 0


def batches_recent(*, principal: Principal, limit: int = 100) -> list[Batch]:
    rows = Batch.objects.order_by("-created_at")
    if principal.biz_ids is not None:
        rows = rows.filter(biz_id__in=principal.biz_ids)
    return list(rows[:limit])
