"""Operator actions on many messages: requeue / redrive, delete and cancel by ids or by a
filter, and bulk jobs for filters too large for one request.

Each action is one audit row (the filter or the selection, and the count) and a trace event
on each message, in the same transaction as the change. RUNNING messages are never taken
from their consumer.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from messages.archive.redrive import archive_redrive_job_run
from messages.delivery.trace import PULLED_FIELDS, row_acks_write, trace_row, trace_write
from messages.filters import MessageFilter, filter_targets
from messages.models import (
    DEAD_STATUSES,
    FINISHED_STATUSES,
    Message,
    MessageTrace,
    Status,
    TraceEvent,
)
from messages.operations.dead_letters import dead_letter_group_ids
from messages.operations.models import BulkJob
from messages.operations.move import move_job_run
from messages.operations.purge import topic_purge_run
from messages.operations.replay import replay_job_run
from messages.services import CANCELLABLE_STATUSES, messages_cancel_rows
from messages.stats.live import live_moved
from mqcenter.celery import app as celery_app
from mqcenter.core.audit import audit_record
from mqcenter.core.auth import Principal
from mqcenter.core.errors import NotFound
from registry.wakeups import wakeup_hub
from topics.models import Topic

BULK_BATCH = 500


def messages_requeue(
    *, principal: Principal, ids: list[int] | None = None, filter: MessageFilter | None = None,
    dead_only: bool = True, described: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Put messages back to NEW now with their topic's retries. `dead_only` (redrive) takes
    only dead letters (FAIL/TIMEOUT/EXPIRED); requeue also takes finished or waiting ones. A
    requeued message loses its expiry (it would expire again at once).
    RUNNING messages are never taken from their consumer.

    A filter matching more than MQ_REDRIVE_SYNC_LIMIT messages becomes a background job.
    The action is one audit row; `described` is what the operator chose when the ids stand
    for something else (a dead-letter group).
    """
    kind = BulkJob.Kind.REDRIVE if dead_only else BulkJob.Kind.REQUEUE
    statuses = list(DEAD_STATUSES) if dead_only else [Status.NEW, Status.SUCCESS, *DEAD_STATUSES]
    rows = filter_targets(principal, ids, filter).filter(status__in=statuses)
    if ids is None and _larger_than(rows, settings.MQ_REDRIVE_SYNC_LIMIT):
        return {"job": bulk_job_create(principal=principal, kind=kind, filter=filter).id}
    with transaction.atomic():
        count = _requeue_batch(principal, rows, kind)
        _audit_bulk(principal, f"message.{kind}", ids, filter, count, described)
    return {"count": count}


def messages_delete(
    *, principal: Principal, ids: list[int] | None = None, filter: MessageFilter | None = None,
    described: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Delete messages and their trace; a large filter becomes a background job."""
    rows = filter_targets(principal, ids, filter)
    if ids is None and _larger_than(rows, settings.MQ_REDRIVE_SYNC_LIMIT):
        return {"job": bulk_job_create(principal=principal, kind=BulkJob.Kind.DELETE, filter=filter).id}
    with transaction.atomic():
        count = _delete_batch(principal, rows)
        _audit_bulk(principal, "message.delete", ids, filter, count, described)
    return {"count": count}


def messages_cancel(
    *, principal: Principal, ids: list[int] | None = None, filter: MessageFilter | None = None
) -> dict[str, Any]:
    """Cancel the NEW or PREPARED messages among `ids` or a filter's matches (the others are
    left alone and not counted); a large filter becomes a background job."""
    rows = filter_targets(principal, ids, filter).filter(status__in=CANCELLABLE_STATUSES)
    if ids is None and _larger_than(rows, settings.MQ_REDRIVE_SYNC_LIMIT):
        return {"job": bulk_job_create(principal=principal, kind=BulkJob.Kind.CANCEL, filter=filter).id}
    with transaction.atomic():
        count = messages_cancel_rows(principal, rows)
        _audit_bulk(principal, "message.cancel", ids, filter, count, None)
    return {"count": count}


def _audit_bulk(principal: Principal, action: str, ids: list[int] | None, filter: MessageFilter | None,
                count: int, described: dict[str, Any] | None) -> None:
    """One audit row for one operator action on messages: the message itself when it names
    one, else what was chosen (the filter, or how many were selected) and how many changed."""
    if not count:
        return
    if ids is not None and len(ids) == 1 and described is None:
        message = Message.objects.filter(id=ids[0]).first()
        if message is not None:
            audit_record(actor=principal.name, action=action, target=message)
            return
        audit_record(actor=principal.name, action=action, target="Message", target_id=ids[0],
                     target_name=f"message {ids[0]}")
        return
    chosen: dict[str, Any] = {"filter": described} if described is not None else (
        {"filter": filter.as_json()} if filter is not None else {"selected": len(ids or ())})
    audit_record(actor=principal.name, action=action, target="Message", target_name=f"{count} messages",
                 after={**chosen, "count": count})


def _larger_than(rows, limit: int) -> bool:  # type: ignore[no-untyped-def]
    # Counts at most limit+1 rows: never a full COUNT(*) of the hot table.
    return len(rows.order_by().values_list("id", flat=True)[: limit + 1]) > limit


def _requeue_batch(principal: Principal, rows, kind: str) -> int:  # type: ignore[no-untyped-def]
    now = timezone.now()
    with transaction.atomic():
        messages = list(rows.select_for_update().order_by("id"))
        topics = {t.name: t for t in Topic.objects.filter(name__in={m.topic for m in messages})}
        live_moved((m.topic, m.group_name, m.status, Status.NEW) for m in messages)
        row_acks_write(messages)  # before their status changes (saved below)
        for message in messages:
            topic = topics.get(message.topic)
            if message.status in FINISHED_STATUSES:  # counted in its batch already: it leaves it
                message.batch_id = None
            message.status = Status.NEW
            message.effect_time = now
            message.retry_remaining = topic.retry_count if topic else 0
            message.lease_expires_at = None
            message.expires_at = None
            message.update_time = now
        Message.objects.bulk_update(
            messages, ["status", "effect_time", "retry_remaining", "lease_expires_at", "expires_at", "update_time",
                       "batch_id", *PULLED_FIELDS],
            batch_size=500
        )
        trace_write(trace_row(m, TraceEvent.REDRIVEN, at=now, actor=principal.name, log=kind) for m in messages)
        pairs = {(m.topic, m.group_name) for m in messages}
        transaction.on_commit(lambda: wakeup_hub().publish(pairs))
    return len(messages)


def _delete_batch(principal: Principal, rows) -> int:  # type: ignore[no-untyped-def]
    with transaction.atomic():
        found = list(rows.select_for_update().order_by("id").values_list("id", "topic", "group_name", "status"))
        ids = [row[0] for row in found]
        live_moved((topic, group, status, None) for _, topic, group, status in found)
        for start in range(0, len(ids), 1000):
            chunk = ids[start : start + 1000]
            MessageTrace.objects.filter(message_id__in=chunk).delete()
            Message.objects.filter(id__in=chunk).delete()
    return len(ids)


# --- bulk jobs ---------------------------------------------------------------------------


def bulk_job_create(
    *, principal: Principal, kind: str, filter: MessageFilter | None, reason: str | None = None,
) -> BulkJob:
    """Record a job and start it after commit (a Celery worker runs `bulk_job_run`).
    `reason` narrows the filter to one dead-letter group (messages/operations/dead_letters.py)."""
    assert filter is not None
    stored = filter.as_json() | ({"reason": reason} if reason is not None else {})
    with transaction.atomic():
        job = BulkJob.objects.create(
            kind=kind, filter=stored, actor=principal.name,
            biz_ids=sorted(principal.biz_ids) if principal.biz_ids is not None else None,
        )
        # One row for the whole job: its filter here; its count is the job's (linked).
        audit_record(actor=principal.name, action=f"bulk.{kind}", target=job, after={"filter": job.filter})
        transaction.on_commit(lambda: celery_app.send_task("messages.bulk_job", args=[job.id]))
    return job


def bulk_job_principal(job: BulkJob) -> Principal:
    """The requester's reach, replayed: a job never touches more than its author could."""
    biz = None if job.biz_ids is None else frozenset(job.biz_ids)
    return Principal(name=job.actor, scopes=("admin",), biz_ids=biz)


def bulk_job_run(*, job_id: int, max_batches: int | None = None) -> BulkJob:
    """Work a job through in batches of BULK_BATCH rows, walking ids downwards.

    Idempotent and safe on several workers: each batch re-selects with row locks, a
    finished job does nothing, and the cursor only moves after a committed batch.
    """
    job = BulkJob.objects.get(id=job_id)
    if job.state in (BulkJob.State.DONE, BulkJob.State.FAILED):
        return job
    if job.kind == BulkJob.Kind.REPLAY:
        return replay_job_run(job, max_batches=max_batches)
    if job.kind == BulkJob.Kind.PURGE:
        return topic_purge_run(job=job, max_batches=max_batches)
    principal = bulk_job_principal(job)
    if job.kind in (BulkJob.Kind.ARCHIVE_REDRIVE, BulkJob.Kind.MOVE):
        run = archive_redrive_job_run if job.kind == BulkJob.Kind.ARCHIVE_REDRIVE else move_job_run
        try:
            return run(job, principal=principal, max_batches=max_batches)
        except Exception as exc:
            job.state, job.error, job.finished_at = BulkJob.State.FAILED, str(exc)[:2000], timezone.now()
            job.save(update_fields=["state", "error", "finished_at"])
            raise
    reason = job.filter.get("reason")
    flt = MessageFilter.parse({k: v for k, v in job.filter.items() if k != "reason"})
    if job.state == BulkJob.State.QUEUED:
        base = flt.queryset(principal)
        if job.kind != BulkJob.Kind.DELETE:
            base = base.filter(status__in=_job_statuses(job.kind))
        # Once, in the background, for the progress bar; a dead-letter group counts its rows.
        job.total = base.order_by().count() if reason is None else len(_group_ids(principal, flt, reason, None, 10**9))
        job.state = BulkJob.State.RUNNING
        job.save(update_fields=["total", "state"])
    batches = 0
    try:
        while max_batches is None or batches < max_batches:
            rows = flt.queryset(principal)
            if job.kind != BulkJob.Kind.DELETE:
                rows = rows.filter(status__in=_job_statuses(job.kind))
            if job.cursor is not None:
                rows = rows.filter(id__lt=job.cursor)
            if reason is None:
                ids = list(rows.order_by("-id").values_list("id", flat=True)[:BULK_BATCH])
            else:
                ids = _group_ids(principal, flt, reason, job.cursor, BULK_BATCH)
            if not ids:
                job.state, job.finished_at = BulkJob.State.DONE, timezone.now()
                job.save(update_fields=["state", "finished_at"])
                return job
            batch = Message.objects.filter(id__in=ids)
            if job.kind == BulkJob.Kind.DELETE:
                done = _delete_batch(principal, batch)
            elif job.kind == BulkJob.Kind.CANCEL:
                done = messages_cancel_rows(principal, batch)
            else:
                done = _requeue_batch(principal, batch.filter(status__in=_job_statuses(job.kind)), job.kind)
            BulkJob.objects.filter(id=job.id).update(cursor=min(ids), processed=job.processed + done)
            job.cursor, job.processed = min(ids), job.processed + done
            batches += 1
    except Exception as exc:
        job.state, job.error, job.finished_at = BulkJob.State.FAILED, str(exc)[:2000], timezone.now()
        job.save(update_fields=["state", "error", "finished_at"])
        raise
    return job


def _group_ids(principal: Principal, flt: MessageFilter, reason: str, before: int | None, limit: int) -> list[int]:
    assert flt.topic is not None and flt.group is not None
    return dead_letter_group_ids(principal=principal, topic=flt.topic, group=flt.group, reason=reason,
                                 before_id=before, limit=limit)


def _job_statuses(kind: str) -> list[str]:
    if kind == BulkJob.Kind.REDRIVE:
        return list(DEAD_STATUSES)
    if kind == BulkJob.Kind.CANCEL:
        return list(CANCELLABLE_STATUSES)
    return [Status.NEW, Status.SUCCESS, *DEAD_STATUSES]


def bulk_job_get(*, principal: Principal, job_id: int) -> BulkJob:
    job = BulkJob.objects.filter(id=job_id).first()
    if job is None or (principal.biz_ids is not None and job.biz_ids != sorted(principal.biz_ids)):
        raise NotFound(f"Job {job_id} does not exist.", details={"id": job_id})
    return job
