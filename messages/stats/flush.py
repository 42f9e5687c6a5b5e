"""The flush job: per-minute stats buckets from the trace, plus backlog snapshots.

Counts are derived incrementally from `mq_message_trace`, whose ids only grow, and
"produced" from `mq_message` (a message's produced event is its row), and the successes of
a first delivery, which write no trace row, from their message rows too
(messages/stats/row_acks.py): each flush reads the
rows after its watermark (a primary-key range scan), adds them to the buckets of their
minute and moves the watermark, all in one transaction that holds the watermark row's
lock. Two workers flushing at once therefore take turns, and a crash between the bucket
writes and the watermark rolls both back: nothing is counted twice.

A trace row is written in the transaction of the change it describes, so a row with a
smaller id can commit slightly after a larger one. The flush only counts rows older than
`SETTLE_SECONDS` and stops at the first younger one, which leaves such transactions time
to commit.

The backlog snapshot reads ix_msg_priority (topic, group, status, priority, effect_time)
per group, only the NEW / RUNNING / dead ranges: index-only, once per flush, never per page
view.
The snapshot also sets the console's live counters (messages/stats/live.py), which the
hot path moves between flushes.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import (
    Case,
    Count,
    IntegerField,
    Min,
    OuterRef,
    Q,
    Subquery,
    Sum,
    Value,
    When,
)
from django.utils import timezone

from messages.archive.models import MessageArchive
from messages.maintenance.models import MaintenanceRun
from messages.models import DEAD_STATUSES, Message, MessageTrace, Status, TraceEvent
from messages.stats.buckets import COUNT_FIELDS, buckets_add, minute_of, no_deltas
from messages.stats.live import live_counts, live_recount_due, live_reset
from messages.stats.models import StatsBucket
from messages.stats.row_acks import SETTLE_SECONDS, flush_row_acks_batch
from topics.models import TopicGroup

logger = logging.getLogger(__name__)

FLUSH_BATCH = 20000
FLUSH_MAX_BATCHES = 50
SNAPSHOT_FIELDS = ("deliverable", "delayed", "running", "dead", "oldest_deliverable_age_seconds")


def _counted_fields(event: str, status_after: str) -> tuple[str, ...]:
    """Which bucket counters one trace event adds to."""
    if event == TraceEvent.ACKED:
        return ("succeeded",)
    if event == TraceEvent.DEAD:
        return ("expired",) if status_after == Status.EXPIRED else ("failed",)
    if event == TraceEvent.RETRY_SCHEDULED:
        return ("retried",)
    if event == TraceEvent.LEASE_EXPIRED:
        return ("lease_expired", "failed" if status_after == Status.TIMEOUT else "retried")
    return ()


COUNTED_EVENTS = (
    TraceEvent.ACKED, TraceEvent.DEAD, TraceEvent.RETRY_SCHEDULED,
    TraceEvent.LEASE_EXPIRED,
)
# An "acked" row of attempt 1 without a log, past the floor, is an ack its message row
# held, written out when a change overwrote the row: counted from the row or by that change
# (row_acks.py). Up to the floor, such a row is the ack itself, written before rows held acks.
WRITTEN_OUT = Q(event=TraceEvent.ACKED, attempt__lte=1, log="")


def stats_flush(*, now: datetime | None = None, batch: int = FLUSH_BATCH, max_batches: int = FLUSH_MAX_BATCHES) -> dict[str, Any]:
    """Count new trace events into buckets (bounded batches) and take a backlog snapshot."""
    now = now or timezone.now()
    MaintenanceRun.objects.get_or_create(job="flush")
    events = 0
    batches = 0
    for flush_one in (_flush_batch, _flush_produced_batch, flush_row_acks_batch):
        for _ in range(max_batches):
            counted, more = flush_one(now=now, batch=batch)
            events += counted
            batches += 1
            if not more:
                break
    pairs = stats_snapshot(now=now)
    purged = stats_purge(now=now)
    return {"events": events, "batches": batches, "snapshot_groups": pairs, "purged_buckets": purged}


def _flush_batch(*, now: datetime, batch: int) -> tuple[int, bool]:
    settled = now - timedelta(seconds=SETTLE_SECONDS)
    with transaction.atomic():
        state = MaintenanceRun.objects.select_for_update().get(job="flush")
        marks = list(
            MessageTrace.objects.filter(id__gt=state.cursor).order_by("id").values_list("id", "at")[:batch]
        )
        taken = _settled(marks, settled)
        if not taken:
            return 0, False
        upper = taken[-1][0]
        # Topic and group come from the message row (a primary-key lookup per event, in
        # the database); messages archived meanwhile are looked up in the archive.
        pair_of = Message.objects.filter(id=OuterRef("message_id"))
        rows = (
            MessageTrace.objects.filter(id__gt=state.cursor, id__lte=upper, event__in=COUNTED_EVENTS)
            .exclude(WRITTEN_OUT & Q(id__gt=state.acked_trace_floor))
            .annotate(m_topic=Subquery(pair_of.values("topic")[:1]),
                      m_group=Subquery(pair_of.values("group_name")[:1]))
            .values_list("message_id", "event", "status_after", "at", "m_topic", "m_group")
        )
        counted = list(rows)
        archived = _archived_pairs({r[0] for r in counted if r[4] is None})
        deltas = no_deltas()
        for message_id, event, status_after, at, topic, group in counted:
            if topic is None:
                pair = archived.get(message_id)
                if pair is None:
                    continue  # the message was deleted before the flush
                topic, group = pair
            for field in _counted_fields(event, status_after):
                deltas[(topic, group, minute_of(at))][field] += 1
        buckets_add(deltas)
        MaintenanceRun.objects.filter(pk=state.pk).update(cursor=upper)
    return len(taken), len(taken) == len(marks) == batch


def _flush_produced_batch(*, now: datetime, batch: int) -> tuple[int, bool]:
    """Count "produced" from the message rows after the message watermark, as
    `_flush_batch` counts trace events (a message's "produced" event is its row, see
    `Message.producer`). A message deleted or archived before the flush reached it is not counted."""
    settled = now - timedelta(seconds=SETTLE_SECONDS)
    with transaction.atomic():
        state = MaintenanceRun.objects.select_for_update().get(job="flush")
        rows = list(
            Message.objects.filter(id__gt=state.message_cursor).order_by("id")
            .values_list("id", "add_time", "producer", "topic", "group_name")[:batch]
        )
        taken = _settled(rows, settled)
        if not taken:
            return 0, False
        deltas = no_deltas()
        for _, add_time, _producer, topic, group in taken:
            deltas[(topic, group, minute_of(add_time))]["produced"] += 1
        buckets_add(deltas)
        MaintenanceRun.objects.filter(pk=state.pk).update(message_cursor=taken[-1][0])
    return len(taken), len(taken) == len(rows) == batch


def _settled(rows: list[Any], settled: datetime) -> list[Any]:
    """The leading rows (id, time, ...) at or before `settled`: younger ones, and any after
    them, wait for the next flush (see the module docstring)."""
    for index, row in enumerate(rows):
        if row[1] > settled:
            return rows[:index]
    return rows


def _archived_pairs(ids: set[int]) -> dict[int, tuple[str, str]]:
    pairs: dict[int, tuple[str, str]] = {}
    id_list = sorted(ids)
    for start in range(0, len(id_list), 2000):
        chunk = id_list[start : start + 2000]
        for mid, topic, group in MessageArchive.objects.filter(id__in=chunk).values_list("id", "topic", "group_name"):
            pairs[mid] = (topic, group)
    return pairs


def backlog_now(*, now: datetime, topic: str | None = None) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (topic, group): deliverable, delayed, running, dead and the oldest deliverable
    age. One small GROUP BY per group over its claim-index ranges of the unfinished and
    dead statuses: SUCCESS rows (most of the table) are never read."""
    pairs = TopicGroup.objects.values_list("topic__name", "name").order_by("topic__name", "name")
    if topic is not None:
        pairs = pairs.filter(topic__name=topic)
    watched = [Status.NEW, Status.RUNNING, *DEAD_STATUSES]
    snapshot: dict[tuple[str, str], dict[str, Any]] = {}
    for topic_name, group in pairs.iterator():
        per_status = (
            Message.objects.filter(topic=topic_name, group_name=group, status__in=watched)
            .values("status")
            .annotate(
                n=Count("id"),
                due=Count(Case(When(effect_time__lte=now, then=Value(1)), output_field=IntegerField())),
                first=Min("effect_time"),
            )
            .order_by()
        )
        entry: dict[str, Any] = {"deliverable": 0, "delayed": 0, "running": 0, "dead": 0,
                                 "oldest_deliverable_age_seconds": None}
        seen = False
        for row in per_status:
            seen = True
            if row["status"] == Status.NEW:
                entry["deliverable"], entry["delayed"] = row["due"], row["n"] - row["due"]
                first = row["first"]
                if row["due"] and isinstance(first, datetime):
                    entry["oldest_deliverable_age_seconds"] = round(max((now - first).total_seconds(), 0.0), 3)
            elif row["status"] == Status.RUNNING:
                entry["running"] = row["n"]
            else:
                entry["dead"] += row["n"]
        if seen:
            snapshot[(topic_name, group)] = entry
    return snapshot


def backlog_live() -> tuple[dict[tuple[str, str], dict[str, int]], datetime | None]:
    """The live counters (waiting, in flight, dead per pair) and when the database last set
    them; set here first when no flush job did for a while (see messages/stats/live.py)."""
    counts, as_of = live_counts()
    if live_recount_due(as_of):
        now = timezone.now()
        live_reset(snapshot=backlog_now(now=now), at=now)
        counts, as_of = live_counts()
    return counts, as_of


def stats_snapshot(*, now: datetime) -> int:
    """Write the backlog of every (topic, group) into the current minute's bucket. Idempotent:
    a second snapshot in the same minute overwrites the first."""
    MaintenanceRun.objects.get_or_create(job="flush")
    minute = minute_of(now)
    snapshot = backlog_now(now=now)
    # Groups that emptied out since the last snapshot get an explicit zero, so charts and
    # alarms do not keep showing their last backlog.
    since = minute - timedelta(minutes=10)
    recent = set(
        StatsBucket.objects.filter(minute__gte=since, deliverable__isnull=False)
        .values_list("topic", "group_name").distinct()
    )
    for pair in recent - set(snapshot):
        snapshot[pair] = {"deliverable": 0, "delayed": 0, "running": 0, "dead": 0,
                          "oldest_deliverable_age_seconds": None}
    with transaction.atomic():
        # Under the flush lock, like the counters: bucket writers never race each other.
        MaintenanceRun.objects.select_for_update().get(job="flush")
        existing = {
            (b.topic, b.group_name): b
            for b in StatsBucket.objects.select_for_update().filter(minute=minute)
        }
        create, update = [], []
        for (topic, group), values in snapshot.items():
            bucket = existing.get((topic, group))
            if bucket is None:
                create.append(StatsBucket(topic=topic, group_name=group, minute=minute, **values))
            else:
                for field, value in values.items():
                    setattr(bucket, field, value)
                update.append(bucket)
        # A concurrent flush may create the same minute's bucket first: skip ours then; the
        # next flush (a few seconds later) writes the snapshot into it.
        StatsBucket.objects.bulk_create(create, batch_size=500, ignore_conflicts=True)
        if update:
            StatsBucket.objects.bulk_update(update, SNAPSHOT_FIELDS, batch_size=500)
    try:  # the console's live counters start again from what was just counted
        live_reset(snapshot=snapshot, at=now)
    except Exception as exc:  # noqa: BLE001 - Redis is not on the flush's path; the next run retries
        logger.warning("live counters not reset (%s)", exc)
    return len(snapshot)


def stats_purge(*, now: datetime, limit: int = 10000) -> int:
    """Drop buckets older than MQ_STATS_RETENTION_DAYS (bounded)."""
    cutoff = now - timedelta(days=settings.MQ_STATS_RETENTION_DAYS)
    ids = list(StatsBucket.objects.filter(minute__lt=cutoff).values_list("id", flat=True)[:limit])
    if not ids:
        return 0
    deleted, _ = StatsBucket.objects.filter(id__in=ids).delete()
    return deleted


def bucket_totals(
    *, topics: list[str] | None, since: datetime, until: datetime, fields: tuple[str, ...] = COUNT_FIELDS
) -> dict[tuple[str, str], dict[str, int]]:
    """Summed counters per (topic, group) over [since, until)."""
    rows = StatsBucket.objects.filter(minute__gte=since, minute__lt=until)
    if topics is not None:
        rows = rows.filter(topic__in=topics)
    out: dict[tuple[str, str], dict[str, int]] = {}
    for row in rows.values("topic", "group_name").annotate(**{f: Sum(f) for f in fields}).order_by():
        out[(row["topic"], row["group_name"])] = {f: row[f] or 0 for f in fields}
    return out
