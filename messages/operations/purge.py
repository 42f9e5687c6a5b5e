"""Deleting a topic leaves nothing of it behind.

Another business line may create a topic of the same name later (by admin API, or by produce
with auto-creation). So deleting a topic first marks its row (`deleting_at`): from then on the
topic is gone for every reader (`Topic.objects` leaves it out), its schedules and open
transactions are gone, and its row still holds the name, so a re-creation answers 409. A purge
job (a `BulkJob` of kind `purge`) then removes everything it held, in bounded batches: its
messages in the live table and the archive with their trace, stats buckets, alarms, consumer
registrations and the Parquet export. The row goes last, once no broker process can still
hold the topic in its cache (MQ_TOPIC_PURGE_SETTLE_SECONDS after the mark) and a last sweep
found nothing: only then is the name free, with nothing of the old topic left to see.
"""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Model
from django.utils import timezone

from messages.alarms.models import Alarm
from messages.archive.models import MessageArchive
from messages.models import Message, MessageTrace
from messages.operations.models import BulkJob
from messages.schedules.models import Schedule
from messages.stats.models import StatsBucket
from messages.transactions.models import Transaction
from mqcenter.celery import app as celery_app
from mqcenter.core.auth import Principal
from registry.models import ConsumerInstance
from topics.locks import lock_topic
from topics.models import Topic
from topics.services import topic_delete, topic_require_drained

# Messages removed per transaction: a large topic holds no long locks. A topic with at most
# this many messages is purged within the delete request.
PURGE_BATCH = 1000
# Batches the maintenance job works on each unfinished purge per run (it has other work too).
RESUME_BATCHES = 20


def topic_remove(*, principal: Principal, topic: Topic) -> BulkJob | None:
    """Delete `topic` and everything of it (see the module). Refused (409) while it has live
    messages. Returns the purge job when the topic is too large to purge within the call
    (the caller answers 202), None when its messages are gone already.

    Takes the topic row's exclusive lock to mark it: a publish holding it shared finishes
    first, and no later publish sees the topic."""
    total = _count(Message, topic.name) + _count(MessageArchive, topic.name)
    with transaction.atomic():
        lock_topic(topic.pk, share=False)
        topic_require_drained(topic=topic)
        topic_delete(actor=principal.name, topic=topic)
        Schedule.objects.filter(topic=topic.name).delete()
        job = BulkJob.objects.create(
            kind=BulkJob.Kind.PURGE,
            filter={"topic": topic.name, "topic_id": topic.pk},
            actor=principal.name,
            biz_ids=sorted(principal.biz_ids) if principal.biz_ids is not None else None,
            total=total,
        )
    _transactions_roll_back(topic.name)
    if total > PURGE_BATCH:
        celery_app.send_task("messages.bulk_job", args=[job.id])
        return job
    topic_purge_run(job=job)
    return None


def topic_purge_run(*, job: BulkJob, max_batches: int | None = None) -> BulkJob:
    """Work a purge job: its topic's messages in batches of PURGE_BATCH (each batch its own
    transaction, so re-running after a crash is safe), then, once settled, the rest and the
    topic row. A job whose topic is not settled yet runs again when it is."""
    name, topic_id = job.filter["topic"], job.filter["topic_id"]
    if job.state == BulkJob.State.QUEUED:
        job.state = BulkJob.State.RUNNING
        job.save(update_fields=["state"])
    # The small things first, so the charts and alarms of the name are gone at once.
    StatsBucket.objects.filter(topic=name).delete()
    Alarm.objects.filter(topic=name).delete()
    batches = 0
    for model in (Message, MessageArchive):
        while max_batches is None or batches < max_batches:
            removed = _purge_batch(model, name)
            if not removed:
                break
            job.processed += removed
            job.save(update_fields=["processed"])
            batches += 1
        else:
            return job
    topic = Topic.all_objects.filter(pk=topic_id).first()
    if topic is not None and topic.deleting_at is not None:
        settle = (
            topic.deleting_at
            + timedelta(seconds=settings.MQ_TOPIC_PURGE_SETTLE_SECONDS)
            - timezone.now()
        )
        if settle > timedelta(0):
            celery_app.send_task(
                "messages.bulk_job", args=[job.id], countdown=settle.total_seconds()
            )
            return job
    # Settled: no process produces to the topic any more. A produce that used a cached topic
    # just before the mark may have added rows after the batches above: sweep once more.
    job.processed += messages_purge(topic=name)
    StatsBucket.objects.filter(topic=name).delete()
    Alarm.objects.filter(topic=name).delete()
    ConsumerInstance.objects.filter(topic=name).delete()
    Schedule.objects.filter(topic=name).delete()
    _export_purge(name)
    Topic.all_objects.filter(pk=topic_id, deleting_at__isnull=False).delete()  # its groups with it
    job.state, job.finished_at = BulkJob.State.DONE, timezone.now()
    job.save(update_fields=["processed", "state", "finished_at"])
    return job


def topic_purges_resume(*, max_batches: int = RESUME_BATCHES) -> int:
    """Work on every unfinished purge (a lost task, a worker killed mid-job), at most
    `max_batches` batches each: maintenance calls this, and a purge that is also running on a
    worker is safe to run twice (each batch deletes what it finds). Returns how many ran."""
    deleting = set(Topic.all_objects.filter(deleting_at__isnull=False).values_list("pk", flat=True))
    ran = 0
    for job in BulkJob.objects.filter(kind=BulkJob.Kind.PURGE).exclude(state=BulkJob.State.DONE):
        if job.filter.get("topic_id") in deleting:
            topic_purge_run(job=job, max_batches=max_batches)
            ran += 1
    return ran


def messages_purge(*, topic: str, batch: int = PURGE_BATCH) -> int:
    """Remove every message of `topic` from the live table and the archive, with its trace,
    `batch` messages per transaction. Returns how many were removed."""
    removed = 0
    for model in (Message, MessageArchive):
        while count := _purge_batch(model, topic, batch):
            removed += count
    return removed


def _purge_batch(
    model: type[Message] | type[MessageArchive], topic: str, batch: int = PURGE_BATCH
) -> int:
    ids = list(
        model.objects.filter(topic=topic).order_by("id").values_list("id", flat=True)[:batch]
    )
    if ids:
        with transaction.atomic():
            MessageTrace.objects.filter(message_id__in=ids).delete()
            model.objects.filter(id__in=ids).delete()
    return len(ids)


def _count(model: type[Model], topic: str) -> int:
    return model._default_manager.filter(topic=topic).order_by().count()


def _transactions_roll_back(topic: str) -> None:
    """Open transactions with messages in the topic are rolled back whole: committing the
    half in other topics would publish a batch its producer meant as one."""
    from messages.transactions.services import transaction_abandon

    for txn_id, topics in Transaction.objects.filter(state=Transaction.State.OPEN).values_list(
        "id", "topics"
    ):
        if topic in topics:
            transaction_abandon(transaction_id=txn_id, reason=f"topic {topic} deleted")


def _export_purge(topic: str) -> None:
    """The topic's folders of the Parquet export (`<kind>/day=.../topic=<name>`)."""
    if not settings.MQ_ARCHIVE_PARQUET_DIR:
        return
    root = Path(settings.MQ_ARCHIVE_PARQUET_DIR)
    for kind in ("messages", "traces"):
        for folder in (root / kind).glob(f"day=*/topic={topic}"):
            shutil.rmtree(folder, ignore_errors=True)
