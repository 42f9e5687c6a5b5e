"""Move (a shovel): messages that are not running go to another topic and group.

Waiting (NEW) and dead (FAIL, TIMEOUT, EXPIRED) messages move. A move stores a copy in the
target (a NEW message with a fresh id, the target topic's retries, `headers["mq-moved-from"]`
= the original id, due when the original was) and ends the original as CANCELLED, so it is
neither delivered nor listed as a dead letter any more, and a second move of the same
filter finds nothing to move twice. Both traces get a `moved` event naming the other
message, in the transaction of the move.

The others are skipped and reported: RUNNING messages stay with their consumer, PREPARED
ones with their open transaction, and SUCCESS or CANCELLED ones have nothing left to
deliver. The caller needs rights on the messages' topics (the filter is cut to its
business lines) and on the target topic.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from messages.batches.progress import batches_finished
from messages.delivery.sql_insert import NewMessage, insert_values
from messages.delivery.trace import TraceRow, trace_write
from messages.filters import MessageFilter, filter_targets
from messages.models import FINISHED_STATUSES, Message, Status, TraceEvent
from messages.operations.models import BulkJob
from mqcenter.celery import app as celery_app
from mqcenter.core.audit import audit_record
from mqcenter.core.auth import Principal
from mqcenter.core.db import retry_on_lock_conflict
from registry.wakeups import wakeup_hub
from topics.locks import lock_topic
from topics.models import Topic
from topics.services import groups_address, topic_get, topic_require_biz

MOVED_FROM = "mq-moved-from"
MOVE_BATCH = 500
MOVABLE = (Status.NEW, Status.FAIL, Status.TIMEOUT, Status.EXPIRED)


def move_target(*, principal: Principal, to_topic: str, to_group: str) -> Topic:
    """The target topic (404 when unknown, 403 outside the principal's business lines); a
    `to_group` it does not have is added unsubscribed when groups are created on demand, as for
    a produce naming it."""
    topic = topic_get(to_topic)
    topic_require_biz(principal, topic)
    groups_address(topic=topic, names=[to_group])
    return topic


def messages_move(
    *,
    principal: Principal,
    to_topic: str,
    to_group: str,
    ids: list[int] | None = None,
    filter: MessageFilter | None = None,
) -> dict[str, Any]:
    """Move messages (`ids`, at most MQ_REDRIVE_SYNC_LIMIT, or a non-empty filter) to
    (to_topic, to_group). Answers `{"count", "moved": [{"id", "moved_from"}],
    "skipped": [{"id", "reason"}]}`, or `{"job": id}` for a filter matching more than
    MQ_REDRIVE_SYNC_LIMIT movable messages. Runs its own transactions."""
    target = move_target(principal=principal, to_topic=to_topic, to_group=to_group)
    rows = filter_targets(principal, ids, filter)
    limit = settings.MQ_REDRIVE_SYNC_LIMIT
    if ids is None:
        if (
            len(
                rows.filter(status__in=MOVABLE).order_by().values_list("id", flat=True)[: limit + 1]
            )
            > limit
        ):
            assert filter is not None
            return {"job": _job_create(principal, filter, to_topic, to_group).id}
        # Finished matches are left out quietly (a filter may match a topic's whole history);
        # the running and prepared ones are reported.
        rows = rows.filter(status__in=[*MOVABLE, Status.RUNNING, Status.PREPARED])
    chosen = {"selected": len(ids)} if ids is not None else {"filter": filter.as_json() if filter else {}}
    moved, skipped = _move_batch(principal, rows, target, to_group, chosen=chosen)
    if ids is not None:
        found = {m["moved_from"] for m in moved} | {s["id"] for s in skipped}
        skipped += [{"id": i, "reason": "not_found"} for i in ids if i not in found]
    return {"count": len(moved), "moved": moved, "skipped": skipped}


@retry_on_lock_conflict
def _move_batch(
    principal: Principal,
    rows: QuerySet[Message],
    target: Topic,
    to_group: str,
    *,
    job_id: int | None = None,
    cursor: int | None = None,
    chosen: dict[str, Any] | None = None,
) -> tuple[list[dict[str, int]], list[dict[str, Any]]]:
    """Move the matching rows in one transaction (with `job_id`, the job's cursor and
    progress move in it too). A request's move writes one audit row: what was chosen (the
    filter, or how many ids were selected) and the count moved, never every id (each moved
    message's trace names both ids); a job's batches write none (its creation is audited
    with its filter, and the job row counts its progress).

    The target topic is locked shared first, as a produce does, so a group being deleted
    meanwhile cannot miss the copies; then the rows, so a claim (SKIP LOCKED) cannot take
    one between the status check and the move.
    """
    now = timezone.now()
    with transaction.atomic():
        lock_topic(target.pk, share=True)
        messages = list(rows.select_for_update().order_by("id"))
        skipped = [
            {"id": m.id, "reason": m.status.lower()} for m in messages if m.status not in MOVABLE
        ]
        skipped += [
            {"id": m.id, "reason": "already_in_target"}
            for m in messages
            if m.status in MOVABLE and (m.topic, m.group_name) == (target.name, to_group)
        ]
        taken = [
            m
            for m in messages
            if m.status in MOVABLE and (m.topic, m.group_name) != (target.name, to_group)
        ]
        new_ids = insert_values(
            Message, [_copy(m, target, to_group, now, principal) for m in taken], return_ids=True
        )
        waiting = [m for m in taken if m.status not in FINISHED_STATUSES]  # batch members finishing now
        for message, new_id in zip(taken, new_ids, strict=True):
            message.status = Status.CANCELLED
            message.last_log = f"moved to {target.name}/{to_group} as message {new_id}"
            message.lease_expires_at, message.update_time = None, now
        Message.objects.bulk_update(
            taken, ["status", "last_log", "lease_expires_at", "update_time"], batch_size=500
        )
        batches_finished(waiting, now=now)
        actor = principal.name[:200]
        trace_write(
            TraceRow(
                m.id, TraceEvent.MOVED, actor, now, m.attempt, None, None, m.status, m.last_log
            )
            for m in taken
        )
        trace_write(
            TraceRow(
                new_id,
                TraceEvent.MOVED,
                actor,
                now,
                0,
                None,
                None,
                Status.NEW,
                f"moved from {m.topic}/{m.group_name} message {m.id}",
            )
            for m, new_id in zip(taken, new_ids, strict=True)
        )
        moved = [
            {"id": new_id, "moved_from": m.id} for m, new_id in zip(taken, new_ids, strict=True)
        ]
        if moved and job_id is None:
            audit_record(
                actor=principal.name,
                action="message.move",
                target=f"{target.name}/{to_group}",
                after={**(chosen or {}), "to": f"{target.name}/{to_group}", "count": len(moved)},
            )
        if job_id is not None:
            BulkJob.objects.filter(id=job_id).update(
                cursor=cursor, processed=F("processed") + len(moved)
            )
        if moved:
            transaction.on_commit(lambda: wakeup_hub().publish([(target.name, to_group)]))
    return moved, skipped


def _copy(
    message: Message, target: Topic, group: str, now: Any, principal: Principal
) -> NewMessage:
    # A message still waiting for its delay keeps it; anything else is due at once.
    due = message.effect_time if message.status == Status.NEW and message.effect_time > now else now
    return NewMessage(
        topic=target.name,
        group_name=group,
        data=message.data,
        key=message.key,
        headers={**(message.headers or {}), MOVED_FROM: str(message.id)},
        status=Status.NEW,
        effect_time=due,
        retry_remaining=target.retry_count,
        attempt=0,
        timeout_seconds=message.timeout_seconds,
        # No dedup key: the original keeps it in its own (topic, group), and the target may
        # hold the same key for another message.
        dedup_key=None,
        last_log="",
        add_time=now,
        update_time=now,
        producer=principal.name[:200],
        publish_id=None,
        priority=message.priority,  # a moved message keeps its priority; its expiry stays behind
        copied_at=now,
        tag=message.tag,
    )


def _job_create(
    principal: Principal, filter: MessageFilter, to_topic: str, to_group: str
) -> BulkJob:
    with transaction.atomic():
        job = BulkJob.objects.create(
            kind=BulkJob.Kind.MOVE,
            filter={**filter.as_json(), "to_topic": to_topic, "to_group": to_group},
            actor=principal.name,
            biz_ids=sorted(principal.biz_ids) if principal.biz_ids is not None else None,
        )
        audit_record(actor=principal.name, action="bulk.move", target=job, after=job.filter)
        transaction.on_commit(lambda: celery_app.send_task("messages.bulk_job", args=[job.id]))
    return job


def move_job_run(job: BulkJob, *, principal: Principal, max_batches: int | None = None) -> BulkJob:
    """Work a move job through, walking the source ids downwards from its cursor (the copies
    get higher ids than any source the job started with, so it never moves one twice)."""
    spec = dict(job.filter)
    to_topic, to_group = spec.pop("to_topic"), spec.pop("to_group")
    flt = MessageFilter.parse(spec)
    target = move_target(principal=principal, to_topic=to_topic, to_group=to_group)
    movable = flt.queryset(principal).filter(status__in=MOVABLE)
    if job.state == BulkJob.State.QUEUED:
        job.total = movable.order_by().count()  # once, in the background, for the progress bar
        job.state = BulkJob.State.RUNNING
        job.save(update_fields=["total", "state"])
    batches = 0
    while max_batches is None or batches < max_batches:
        rows = movable.filter(id__lt=job.cursor) if job.cursor is not None else movable
        ids = list(rows.order_by("-id").values_list("id", flat=True)[:MOVE_BATCH])
        if not ids:
            job.state, job.finished_at = BulkJob.State.DONE, timezone.now()
            job.save(update_fields=["state", "finished_at"])
            break
        _move_batch(
            principal,
            Message.objects.filter(id__in=ids),
            target,
            to_group,
            job_id=job.id,
            cursor=min(ids),
        )
        job.refresh_from_db(fields=["cursor", "processed"])
        batches += 1
    return job
