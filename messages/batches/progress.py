"""A batch's progress: each member's finish counted in the transaction that finishes it, and
the one completion callback (see messages/batches/services.py)."""

from __future__ import annotations

import json
import logging
import secrets
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from messages.batches.models import Batch
from messages.delivery.sql_insert import NewMessage, insert_values
from messages.models import Message, Status
from messages.routing.filters import copies_for, skipped_record, subscriptions_locked
from registry.wakeups import wakeup_hub
from topics.cache import topic_cache

logger = logging.getLogger(__name__)

CALLBACK_TAG = "batch.completed"
OUTCOME_OF = {Status.SUCCESS: "success", Status.FAIL: "dead", Status.TIMEOUT: "dead",
              Status.EXPIRED: "expired", Status.CANCELLED: "cancelled"}
DEFAULT_GROUP = "default"


def batches_finished(messages: Iterable[Any], *, now: datetime) -> None:
    """Count members that just finished, in the caller's transaction (the one that finished
    them; it holds their row locks). Anything with `batch_id` and `status`; those without a
    batch, or not finished (a retry), are passed over."""
    outcomes: dict[str, Counter[str]] = {}
    for message in messages:
        if message.batch_id is not None and message.status in OUTCOME_OF:
            outcomes.setdefault(message.batch_id, Counter())[OUTCOME_OF[message.status]] += 1
    for batch_id in sorted(outcomes):  # one lock order: no deadlock between finishing transactions
        counts = outcomes[batch_id]
        done = sum(counts.values())
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE mq_batch SET pending = pending - %s, success = success + %s, dead = dead + %s, "
                "expired = expired + %s, cancelled = cancelled + %s WHERE id = %s AND completed_at IS NULL",
                [done, counts["success"], counts["dead"], counts["expired"], counts["cancelled"], batch_id],
            )
            if cursor.rowcount == 0:
                continue  # gone, or completed already (a redriven member finishing again)
        batch = Batch.objects.get(id=batch_id)  # our UPDATE holds its lock until commit
        if batch.pending <= 0:
            batch_complete(batch, now)


def batch_complete(batch: Batch, now: datetime) -> None:
    """Stamp the batch complete and store its callback message, in the caller's transaction."""
    data = {"batch_id": batch.id, "total": batch.total, "success": batch.success, "dead": batch.dead,
            "expired": batch.expired, "cancelled": batch.cancelled}
    batch.completed_at = now
    batch.callback_message_id, batch.callback_error = _callback(batch, data, now)
    batch.save(update_fields=["completed_at", "callback_message_id", "callback_error"])


def _callback(batch: Batch, data: dict[str, Any], now: datetime) -> tuple[int | None, str]:
    """Publish the completion message to the callback topic (every subscribed group whose
    filter matches its tag, or `default`). Written here rather than through the produce
    service: it runs inside the finishing transaction, which on MySQL is not Django's."""
    topic = topic_cache.get(batch.callback_topic)
    if topic is None:
        logger.warning("batch %s completed; its callback topic %s is gone", batch.id, batch.callback_topic)
        return None, f"callback topic {batch.callback_topic} does not exist"
    skipped: Counter[int] = Counter()
    subscriptions = subscriptions_locked(topic.pk)
    groups = copies_for(subscriptions, CALLBACK_TAG, {}, skipped) if subscriptions else [DEFAULT_GROUP]
    text = json.dumps(data, separators=(",", ":"))
    publish_id = secrets.randbits(63)
    rows = [
        NewMessage(topic=topic.name, group_name=group, data=text, key=batch.id, headers={"mq-batch": batch.id},
                   status=Status.NEW, effect_time=now, retry_remaining=topic.retry_count, attempt=0,
                   timeout_seconds=topic.timeout_seconds, dedup_key=f"mq-batch:{batch.id}", last_log="",
                   add_time=now, update_time=now, producer="broker", publish_id=publish_id, tag=CALLBACK_TAG)
        for group in groups
    ]
    ids = insert_values(Message, rows, return_ids=True)
    skipped_record(skipped)
    _wake_after_commit({(topic.name, group) for group in groups})
    return (ids[0] if ids else None), ""


# Wake-ups waiting for the commit of a transaction Django does not manage (the hot path's
# `sql.short_transaction` on MySQL): `batch_wakes` around it publishes them once it committed.
_deferred: ContextVar[set[tuple[str, str]] | None] = ContextVar("batch_wakes", default=None)


def _wake_after_commit(pairs: set[tuple[str, str]]) -> None:
    if connection.in_atomic_block:
        transaction.on_commit(lambda: wakeup_hub().publish(pairs))
        return
    deferred = _deferred.get()
    if deferred is not None:
        deferred.update(pairs)
    else:  # a hint before the commit: a pull it wakes too early waits for its fallback poll
        wakeup_hub().publish(pairs)


@contextmanager
def batch_wakes() -> Iterator[None]:
    """Around a transaction that may complete batches: their callbacks' wake-ups go out after
    it (enter this before the transaction, so that it exits after the commit)."""
    token = _deferred.set(set())
    try:
        yield
        pairs = _deferred.get()
    finally:
        _deferred.reset(token)
    if pairs:
        wakeup_hub().publish(pairs)
