"""Replay: copy a topic's published history into one group (a group created from `earliest`
or from a time), and put archived messages back into the live table.

A replay reads the topic's published rows (`publish_id` set) in id order, from the live
table and the archive together (they share ids), and copies one row per publish (never a
replayed copy: its original is in the history). Every
copy is a new NEW message with a fresh id, the original's `add_time` and `publish_id`, and
`headers["mq-replay-of"]` = the original's id. It carries no dedup key: two publishes of
one key may both be in the history, and the group must still get both.

A replay reads only ids up to the `high_water` taken when its group was created, under the
topic's exclusive lock: every publish up to it was then committed, and every later one was
copied to the group by the produce itself. So the group gets each publish once, no gap.

A large replay is a BulkJob worked in batches; its cursor (the last source id copied)
moves in the transaction that stores the batch's copies, so a batch is never copied twice.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import F, Model, QuerySet
from django.utils import timezone

from messages.models import BulkJob, Message, MessageArchive, Status
from messages.services.produce import NewMessage
from messages.sql import INSERT_CHUNK, insert_values
from registry.wakeups import wakeup_hub
from topics.cache import topic_cache
from topics.models import Topic

REPLAY_BATCH = 1000
REPLAY_OF = "mq-replay-of"
# The copies of one publish are stored by one INSERT of at most INSERT_CHUNK rows, so they
# lie within this many ids of each other: a batch looks this far back for earlier copies.
COPIES_SPAN = INSERT_CHUNK * 4


def replay_sources(*, topic: str, since: datetime | None, high_water: int) -> QuerySet[Message]:
    """The live published rows a replay reads (for counting before it starts)."""
    rows = Message.objects.filter(topic=topic, publish_id__isnull=False, id__lte=high_water)
    return rows.filter(add_time__gte=since) if since is not None else rows


def replay_estimate(*, topic: str, since: datetime | None, high_water: int, limit: int) -> int:
    """How many rows (copies, live and archived) a replay reads, counted up to `limit` + 1."""
    archived = MessageArchive.objects.filter(topic=topic, publish_id__isnull=False, id__lte=high_water)
    if since is not None:
        archived = archived.filter(add_time__gte=since)
    live = replay_sources(topic=topic, since=since, high_water=high_water)
    return len(live.values_list("id", flat=True)[: limit + 1]) + len(archived.values_list("id", flat=True)[: limit + 1])


def replay_batch(*, topic: Topic, group: str, since: datetime | None, high_water: int, after: int,
                 actor: str, job_id: int | None = None) -> tuple[int, int | None]:
    """Copy the next batch of publishes after source id `after` into `group`. Returns how many
    were copied and the new cursor (None when the history is exhausted). With `job_id`, the
    job's cursor and progress move in the same transaction as the copies."""
    live = _published(Message, topic.name, since, after, high_water)
    archived = _published(MessageArchive, topic.name, since, after, high_water)
    if not live and not archived:
        return 0, None
    # Read up to the first point both lists cover: the shorter full list bounds the batch.
    upto = high_water
    for rows in (live, archived):
        if len(rows) == REPLAY_BATCH:
            upto = min(upto, rows[-1]["id"])
    sources = sorted((r for r in live + archived if r["id"] <= upto), key=lambda r: r["id"])
    seen = _publishes_before(topic.name, {r["publish_id"] for r in sources}, after)
    now = timezone.now()
    copies = []
    for row in sources:
        if row["publish_id"] in seen or REPLAY_OF in (row["headers"] or {}):
            continue  # a copy of a publish already copied, or a replayed copy (its original is the source)
        seen.add(row["publish_id"])
        copies.append(_copy(row, topic, group, now, actor))
    with transaction.atomic():
        insert_values(Message, copies, return_ids=False)
        if job_id is not None:
            BulkJob.objects.filter(id=job_id).update(cursor=upto, processed=F("processed") + len(copies))
    if copies:
        wakeup_hub().publish([(topic.name, group)])
    return len(copies), upto


def archived_copy(row: dict[str, Any], *, topic: Topic, group: str, actor: str) -> NewMessage:
    """A NEW live copy of an archived message (archive redrive)."""
    return _copy(row, topic, group, timezone.now(), actor)


COPIED_FIELDS = ("id", "data", "key", "headers", "status", "effect_time", "timeout_seconds", "add_time",
                 "producer", "publish_id", "priority")


def _published(model: type[Model], topic: str, since: datetime | None, after: int, high_water: int) -> list[dict]:
    rows = model._default_manager.filter(
        topic=topic, publish_id__isnull=False, id__gt=after, id__lte=high_water
    )
    if since is not None:
        rows = rows.filter(add_time__gte=since)
    return list(rows.order_by("id").values(*COPIED_FIELDS)[:REPLAY_BATCH])


def _publishes_before(topic: str, publish_ids: set[int], after: int) -> set[int]:
    """Which of these publishes have a copy just before the batch (copied by the previous one)."""
    if not publish_ids or after <= 0:
        return set()
    found: set[int] = set()
    for model in (Message, MessageArchive):
        found.update(
            model._default_manager.filter(
                topic=topic, id__gt=after - COPIES_SPAN, id__lte=after, publish_id__in=publish_ids
            ).values_list("publish_id", flat=True)
        )
    return found


def _copy(row: dict[str, Any], topic: Topic, group: str, now: datetime, actor: str) -> NewMessage:
    # A publish still waiting for its delay keeps it; anything else is due at once, in the
    # order it was produced (queue claims order by effect_time).
    effect_time = row["effect_time"] if row["status"] == Status.NEW and row["effect_time"] > now else row["add_time"]
    return NewMessage(
        topic=topic.name, group_name=group, data=row["data"], key=row["key"],
        headers={**(row["headers"] or {}), REPLAY_OF: str(row["id"])}, status=Status.NEW,
        effect_time=effect_time, retry_remaining=topic.retry_count, attempt=0,
        timeout_seconds=row["timeout_seconds"], dedup_key=None, last_log="", add_time=row["add_time"],
        update_time=now, producer=(row["producer"] or actor)[:200], publish_id=row["publish_id"],
        priority=row["priority"],
    )


def replay_job_run(job: BulkJob, *, max_batches: int | None = None) -> BulkJob:
    """Work a replay job through, batch by batch, from its cursor."""
    spec = job.filter
    topic = topic_cache.get(spec["topic"])
    if topic is None:  # the topic was deleted meanwhile: nothing left to copy
        job.state, job.finished_at = BulkJob.State.DONE, timezone.now()
        job.save(update_fields=["state", "finished_at"])
        return job
    since = datetime.fromisoformat(spec["since"]) if spec.get("since") else None
    if job.state == BulkJob.State.QUEUED:
        job.state = BulkJob.State.RUNNING
        job.save(update_fields=["state"])
    batches = 0
    while max_batches is None or batches < max_batches:
        _copied, cursor = replay_batch(
            topic=topic, group=spec["group"], since=since, high_water=spec["high_water"],
            after=job.cursor or 0, actor=job.actor, job_id=job.id,
        )
        batches += 1
        if cursor is None:
            job.state, job.finished_at = BulkJob.State.DONE, timezone.now()
            job.save(update_fields=["state", "finished_at"])
            break
        job.refresh_from_db(fields=["cursor", "processed"])
    return job
