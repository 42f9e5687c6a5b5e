"""Archive redrive: put copies of archived messages back into the live table.

The archived message stays where it is (its history is the record of what happened); the
copy is a NEW message of the same topic and group with a fresh id and
`headers["mq-replay-of"]` = the archived id, built like a group replay's copies
(`replay.archived_copy`). Both traces get a `redriven` event naming the other message.

A filter matching more than MQ_REDRIVE_SYNC_LIMIT archived messages becomes a BulkJob that
walks the archive's ids downwards; its cursor and progress move in the transaction that
stores a batch's copies, so a batch is never copied twice.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from messages.delivery.sql_insert import insert_values
from messages.delivery.trace import TraceRow, trace_write
from messages.filters import ArchiveFilter, filter_targets
from messages.models import Message, TraceEvent
from messages.operations.models import BulkJob
from messages.operations.replay import COPIED_FIELDS, archived_copy
from mqcenter.celery import app as celery_app
from mqcenter.core.audit import audit_record
from mqcenter.core.auth import Principal
from mqcenter.core.errors import MQError
from registry.wakeups import wakeup_hub
from topics.cache import topic_cache
from topics.models import Topic
from topics.services import groups_address

ARCHIVE_REDRIVE_BATCH = 500


def archive_messages_redrive(
    *, principal: Principal, ids: list[int] | None = None, filter: ArchiveFilter | None = None
) -> dict[str, Any]:
    """Copy archived messages back into the live table as NEW. Answers
    `{"count", "copies": [{"id", "replay_of"}], "skipped": [{"id", "reason"}]}`, or
    `{"job": id}` for a filter matching more than MQ_REDRIVE_SYNC_LIMIT messages.

    Runs its own transaction (call it outside one): copies, traces and audit commit together.
    """
    rows = filter_targets(principal, ids, filter, kind=ArchiveFilter)
    limit = settings.MQ_REDRIVE_SYNC_LIMIT
    if ids is None and len(rows.order_by().values_list("id", flat=True)[: limit + 1]) > limit:
        assert filter is not None
        return {"job": _job_create(principal, filter).id}
    chosen = {"selected": len(ids)} if ids is not None else {"filter": filter.as_json() if filter else {}}
    copies, skipped = _redrive_batch(
        principal, list(rows.order_by("id").values(*COPIED_FIELDS, "topic", "group_name")), chosen=chosen
    )
    if ids is not None:
        found = {c["replay_of"] for c in copies} | {s["id"] for s in skipped}
        skipped += [{"id": i, "reason": "not_found"} for i in ids if i not in found]
    return {"count": len(copies), "copies": copies, "skipped": skipped}


def _redrive_batch(
    principal: Principal,
    rows: list[dict[str, Any]],
    *,
    job_id: int | None = None,
    cursor: int | None = None,
    chosen: dict[str, Any] | None = None,
) -> tuple[list[dict[str, int]], list[dict[str, Any]]]:
    """Copy `rows` (archived values) into the live table in one transaction; with `job_id`,
    the job's cursor and progress move in it too. A request's redrive writes one audit row
    with what was chosen (the filter, or how many ids) and the count, never every id (each
    copy's trace names its source); a job's batches write none (its creation is audited)."""
    now = timezone.now()
    news, sources, skipped = [], [], []
    missing: dict[tuple[str, str], str | None] = {}  # why a (topic, group) takes no copies
    for row in rows:
        pair = (row["topic"], row["group_name"])
        topic = topic_cache.get(row["topic"])
        if pair not in missing:
            missing[pair] = _missing(topic, row["group_name"])
        if topic is None or missing[pair] is not None:
            skipped.append({"id": row["id"], "reason": missing[pair]})
            continue
        news.append(archived_copy(row, topic=topic, group=row["group_name"], actor=principal.name, now=now))
        sources.append(row)
    with transaction.atomic():
        new_ids = insert_values(Message, news, return_ids=True)
        trace_write(
            TraceRow(
                new_id,
                TraceEvent.REDRIVEN,
                principal.name[:200],
                now,
                0,
                None,
                None,
                "NEW",
                f"copy of archived message {row['id']}",
            )
            for new_id, row in zip(new_ids, sources, strict=True)
        )
        trace_write(
            TraceRow(
                row["id"],
                TraceEvent.REDRIVEN,
                principal.name[:200],
                now,
                0,
                None,
                None,
                row["status"],
                f"copied back to the live table as message {new_id}",
            )
            for new_id, row in zip(new_ids, sources, strict=True)
        )
        copies = [
            {"id": new_id, "replay_of": row["id"]}
            for new_id, row in zip(new_ids, sources, strict=True)
        ]
        if copies and job_id is None:
            audit_record(
                actor=principal.name,
                action="archive.redrive",
                target="MessageArchive",
                after={**(chosen or {}), "count": len(copies)},
            )
        if job_id is not None:
            BulkJob.objects.filter(id=job_id).update(
                cursor=cursor, processed=F("processed") + len(copies)
            )
        pairs = {(n.topic, n.group_name) for n in news}
        transaction.on_commit(lambda: wakeup_hub().publish(pairs))
    return copies, skipped


def _missing(topic: Topic | None, group: str) -> str | None:
    if topic is None:
        return "topic_deleted"
    try:
        groups_address(topic=topic, names=[group])  # as for a produce naming it
    except MQError:
        return "group_deleted"  # and groups are not created on demand (MQ_AUTO_CREATE_GROUPS)
    return None


def _job_create(principal: Principal, filter: ArchiveFilter) -> BulkJob:
    with transaction.atomic():
        job = BulkJob.objects.create(
            kind=BulkJob.Kind.ARCHIVE_REDRIVE,
            filter=filter.as_json(),
            actor=principal.name,
            biz_ids=sorted(principal.biz_ids) if principal.biz_ids is not None else None,
        )
        audit_record(
            actor=principal.name, action="bulk.archive_redrive", target=job, after=job.filter
        )
        transaction.on_commit(lambda: celery_app.send_task("messages.bulk_job", args=[job.id]))
    return job


def archive_redrive_job_run(
    job: BulkJob, *, principal: Principal, max_batches: int | None = None
) -> BulkJob:
    """Work an archive redrive job through, batch by batch, walking ids downwards from its cursor."""
    flt = ArchiveFilter.parse(job.filter)
    if job.state == BulkJob.State.QUEUED:
        job.total = (
            flt.queryset(principal).order_by().count()
        )  # once, in the background, for the progress bar
        job.state = BulkJob.State.RUNNING
        job.save(update_fields=["total", "state"])
    batches = 0
    while max_batches is None or batches < max_batches:
        rows = flt.queryset(principal)
        if job.cursor is not None:
            rows = rows.filter(id__lt=job.cursor)
        batch = list(
            rows.order_by("-id").values(*COPIED_FIELDS, "topic", "group_name")[
                :ARCHIVE_REDRIVE_BATCH
            ]
        )
        if not batch:
            job.state, job.finished_at = BulkJob.State.DONE, timezone.now()
            job.save(update_fields=["state", "finished_at"])
            break
        _redrive_batch(principal, batch, job_id=job.id, cursor=batch[-1]["id"])
        job.refresh_from_db(fields=["cursor", "processed"])
        batches += 1
    return job
