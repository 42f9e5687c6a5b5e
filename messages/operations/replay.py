"""Replay: copy a topic's published history into one group (a group created from `earliest`
or from a time, or replayed again), and put archived messages back into the live table.

A replay reads the topic's published rows (`publish_id` set) in id order, from the live
table and the archive together (they share ids), and copies each publish once: its copies
in other groups share the `publish_id`, and a run's copies carry the dedup key
`mq-replay:<run>:<publish_id>`, so the (topic, group, dedup key) unique index holds one
copy per publish per run whatever batches the copies fell in. Every copy is a new NEW
message with a fresh id, the original's `add_time` and `publish_id`,
`headers["mq-replay-of"]` = the original's id, and `copied_at`, when it was made. Messages
of transactions not committed (PREPARED) or cancelled are not part of the history.

A replay reads only ids up to the `high_water` taken when it started, under the topic's
exclusive lock: every publish up to it was then committed, and every later one was copied
to the group by the produce itself. So the group gets each publish once, no gap.

A large replay is a BulkJob worked in batches; its cursor (the last source id copied)
moves, from the value the batch started at, in the transaction that stores the batch's
copies: a second worker running the same job at once copies nothing twice.
"""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import F, Model, QuerySet
from django.utils import timezone

from messages.archive.models import MessageArchive
from messages.delivery.sql_insert import NewMessage, insert_values
from messages.models import Message, Status
from messages.operations.models import BulkJob
from messages.routing.filters import filter_matcher
from messages.stats.live import live_copied
from registry.wakeups import wakeup_hub
from topics.cache import topic_cache
from topics.models import Topic, TopicGroup

REPLAY_BATCH = 1000
REPLAY_OF = "mq-replay-of"
COMMIT_COPY_OF = "mq-commit-copy-of"  # messages/transactions/copies.py
# Not part of a topic's history: open transactions, and cancelled (or moved away) messages.
NOT_HISTORY = (Status.PREPARED, Status.CANCELLED)


def replay_run_key() -> str:
    """A replay run's part of its copies' dedup keys (a job's is its id)."""
    return f"r{secrets.randbits(48):x}"


def replay_sources(*, topic: str, since: datetime | None, high_water: int) -> QuerySet[Message]:
    """The live published rows a replay reads (for counting before it starts)."""
    rows = Message.objects.filter(topic=topic, publish_id__isnull=False, id__lte=high_water).exclude(
        status__in=NOT_HISTORY)
    return rows.filter(add_time__gte=since) if since is not None else rows


def replay_estimate(*, topic: str, since: datetime | None, high_water: int, limit: int) -> int:
    """How many rows (copies, live and archived) a replay reads, counted up to `limit` + 1."""
    archived = MessageArchive.objects.filter(topic=topic, publish_id__isnull=False, id__lte=high_water).exclude(
        status__in=NOT_HISTORY)
    if since is not None:
        archived = archived.filter(add_time__gte=since)
    live = replay_sources(topic=topic, since=since, high_water=high_water)
    return len(live.values_list("id", flat=True)[: limit + 1]) + len(archived.values_list("id", flat=True)[: limit + 1])


def replay_batch(*, topic: Topic, group: str, since: datetime | None, high_water: int, after: int,
                 actor: str, run: str, job_id: int | None = None) -> tuple[int, int | None]:
    """Copy the next batch of publishes after source id `after` into `group`. Returns how many
    were copied and the new cursor (None when the history is exhausted). With `job_id`, the
    job's cursor and progress move in the same transaction as the copies, and only from
    `after`: when another worker moved it first, nothing is copied (the caller re-reads it)."""
    live = _published(Message, topic.name, since, after, high_water)
    archived = _published(MessageArchive, topic.name, since, after, high_water)
    if not live and not archived:
        return 0, None
    # Read up to the first point both lists cover: the shorter full list bounds the batch.
    upto = high_water
    for rows in (live, archived):
        if len(rows) == REPLAY_BATCH:
            upto = min(upto, rows[-1]["id"])
    now = timezone.now()
    copies: dict[str, NewMessage] = {}  # by dedup key: the first (lowest id) copy of each publish
    # A filtered group is replayed the publishes its filter matches, as a publish copies them.
    matches = filter_matcher(TopicGroup.objects.filter(topic=topic, name=group).values_list("filter_spec", flat=True).first())
    for row in sorted((r for r in live + archived if r["id"] <= upto), key=lambda r: r["id"]):
        if matches is not None and not matches(row["tag"], row["headers"] or {}):
            continue
        key = f"mq-replay:{run}:{row['publish_id']}"
        copies.setdefault(key, _copy(row, topic, group, now, actor, dedup_key=key))
    with transaction.atomic():
        done = set(Message.objects.filter(topic=topic.name, group_name=group, dedup_key__in=list(copies))
                   .values_list("dedup_key", flat=True))  # copied by the previous batch
        committed = _committed_since(topic.name, group, high_water, {c.publish_id for c in copies.values()})
        fresh = [copy for key, copy in copies.items() if key not in done and copy.publish_id not in committed]
        if job_id is not None:
            moved = BulkJob.objects.filter(id=job_id, cursor=after or None).update(
                cursor=upto, processed=F("processed") + len(fresh))
            if not moved:
                return 0, after
        insert_values(Message, fresh, return_ids=False)
        live_copied(topic.name, group, len(fresh))
    if fresh:
        wakeup_hub().publish([(topic.name, group)])
    return len(fresh), upto


def _committed_since(topic: str, group: str, high_water: int, publish_ids: set[int | None]) -> set[int]:
    """The publishes among `publish_ids` a transaction's commit copied into `group` after the
    replay started (messages/transactions/copies.py): prepared when the replay began, they
    reach the group by that copy, not by the replay."""
    rows = Message.objects.filter(topic=topic, group_name=group, id__gt=high_water,
                                  publish_id__in=[p for p in publish_ids if p is not None])
    return {pid for pid, headers in rows.values_list("publish_id", "headers") if COMMIT_COPY_OF in (headers or {})}


def archived_copy(row: dict[str, Any], *, topic: Topic, group: str, actor: str,
                  now: datetime | None = None) -> NewMessage:
    """A NEW live copy of an archived message (archive redrive), made `now`."""
    return _copy(row, topic, group, now or timezone.now(), actor)


COPIED_FIELDS = ("id", "data", "key", "headers", "status", "effect_time", "timeout_seconds", "add_time",
                 "producer", "publish_id", "priority", "tag")


def _published(model: type[Model], topic: str, since: datetime | None, after: int, high_water: int) -> list[dict]:
    rows = model._default_manager.filter(
        topic=topic, publish_id__isnull=False, id__gt=after, id__lte=high_water
    ).exclude(status__in=NOT_HISTORY)
    if since is not None:
        rows = rows.filter(add_time__gte=since)
    return list(rows.order_by("id").values(*COPIED_FIELDS)[:REPLAY_BATCH])


def _copy(row: dict[str, Any], topic: Topic, group: str, now: datetime, actor: str,
          dedup_key: str | None = None) -> NewMessage:
    # A publish still waiting for its delay keeps it; anything else is due at once, in the
    # order it was produced (queue claims order by effect_time).
    effect_time = row["effect_time"] if row["status"] == Status.NEW and row["effect_time"] > now else row["add_time"]
    return NewMessage(
        topic=topic.name, group_name=group, data=row["data"], key=row["key"],
        headers={**(row["headers"] or {}), REPLAY_OF: str(row["id"])}, status=Status.NEW,
        effect_time=effect_time, retry_remaining=topic.retry_count, attempt=0,
        timeout_seconds=row["timeout_seconds"], dedup_key=dedup_key, last_log="", add_time=row["add_time"],
        update_time=now, producer=(row["producer"] or actor)[:200], publish_id=row["publish_id"],
        priority=row["priority"], copied_at=now, tag=row["tag"],
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
            after=job.cursor or 0, actor=job.actor, run=f"j{job.id}", job_id=job.id,
        )
        batches += 1
        if cursor is None:
            job.state, job.finished_at = BulkJob.State.DONE, timezone.now()
            job.save(update_fields=["state", "finished_at"])
            break
        job.refresh_from_db(fields=["cursor", "processed"])
    return job
