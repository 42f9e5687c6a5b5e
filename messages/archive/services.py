"""The cleanup job: archive finished messages past retention, purge the archive, export
archived history to Parquet, prune the registry.

Archiving moves a batch in one transaction: the rows are locked with SKIP LOCKED (two
workers take disjoint batches), copied into `mq_message_archive` under the same id, given
an `archived` trace event, and deleted from the hot table. The trace rows themselves stay
where they are (shared by message id), so an archived message keeps its whole history.
"""

from __future__ import annotations

import os
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from messages.archive.models import ArchiveExport, MessageArchive
from messages.batches.services import batches_purge
from messages.delivery.sql import first_id_added_since
from messages.maintenance.models import MaintenanceRun
from messages.models import FINISHED_STATUSES, Message, MessageTrace, TraceEvent
from messages.operations.purge import topic_purges_resume
from registry.services import registry_prune
from topics.models import Topic

ARCHIVE_BATCH = 2000
ARCHIVE_MAX_BATCHES = 250  # 500k messages per run at most: the next run continues
PURGE_BATCH = 1000
PURGE_MAX_BATCHES = 200
EXPORT_CHUNK = 5000
EXPORT_MAX_ROWS = 1_000_000
ARCHIVE_FIELDS = [f.name for f in Message._meta.concrete_fields]


def maintenance_cleanup(*, now: datetime | None = None) -> dict[str, Any]:
    """The whole cleanup job, each step bounded."""
    now = now or timezone.now()
    archived = messages_archive(now=now)
    exported = archive_export()  # its own clock: the archive step stamped rows after `now`
    purged = archive_purge(now=now)
    pruned = registry_prune(now=now)
    topics_purged = topic_purges_resume()
    batches = batches_purge(now=now)
    return {"archived": archived, "exported": exported, "purged": purged, "pruned": pruned,
            "topic_purges": topics_purged, "batches_purged": batches}


# --- archiving ---------------------------------------------------------------------------


def messages_archive(
    *, now: datetime | None = None, batch: int = ARCHIVE_BATCH, max_batches: int = ARCHIVE_MAX_BATCHES
) -> int:
    """Move finished messages older than their topic's retention into the archive.

    "Older" is measured from the last change (update_time): a message redriven yesterday
    stays as long as one finished yesterday. Returns how many moved in this call.
    """
    now = now or timezone.now()
    moved = 0
    batches = 0
    bounds: dict[int, int | None] = {}
    for topic in Topic.objects.order_by("name"):
        cutoff = now - timedelta(days=topic.retention_days)
        # Rows added after the cutoff cannot have finished before it (update_time >=
        # add_time), so each topic's scan stops at the first such id: with nothing due, the
        # range is empty instead of a walk through the whole topic.
        if topic.retention_days not in bounds:
            bounds[topic.retention_days] = first_id_added_since(cutoff)
        before = bounds[topic.retention_days]
        # Each batch continues after the previous one's last id, so the scan never passes
        # the topic's unfinished messages twice in one run (rows another worker held
        # locked are left for the next run).
        after = 0
        while batches < max_batches:
            n, after = _archive_batch(topic=topic.name, cutoff=cutoff, after=after, before=before, batch=batch,
                                      retention_days=topic.retention_days)
            batches += 1
            moved += n
            if n < batch:
                break
    return moved


def _archive_batch(
    *, topic: str, cutoff: datetime, after: int, before: int | None, batch: int, retention_days: int
) -> tuple[int, int]:
    """One batch, set-based: copy, trace and delete the locked rows inside the database.
    Returns how many moved and the last id looked at."""
    with transaction.atomic():
        rows = Message.objects.select_for_update(skip_locked=True).filter(
            topic=topic, id__gt=after, status__in=FINISHED_STATUSES, update_time__lt=cutoff
        )
        if before is not None:
            rows = rows.filter(id__lt=before)
        ids = list(rows.order_by("id").values_list("id", flat=True)[:batch])
        if not ids:
            return 0, after
        # Stamped per batch (not per run): the export reads archived_at as a watermark.
        archived_at = timezone.now()
        qn = connection.ops.quote_name
        columns = ", ".join(qn(f.column) for f in Message._meta.concrete_fields)
        marks = ", ".join(["%s"] * len(ids))
        trace_columns = ", ".join(
            qn(c) for c in ("message_id", "event", "actor", "at", "attempt", "rank", "total", "status_after", "log")
        )
        with connection.cursor() as cur:
            cur.execute(
                f"INSERT INTO {qn(MessageArchive._meta.db_table)} ({columns}, {qn('archived_at')}) "  # noqa: S608 - names from the models
                f"SELECT {columns}, %s FROM {qn(Message._meta.db_table)} WHERE {qn('id')} IN ({marks})",
                [archived_at, *ids],
            )
            cur.execute(
                f"INSERT INTO {qn(MessageTrace._meta.db_table)} ({trace_columns}) "  # noqa: S608 - names from the models
                f"SELECT {qn('id')}, %s, %s, %s, {qn('attempt')}, NULL, NULL, {qn('status')}, %s "
                f"FROM {qn(Message._meta.db_table)} WHERE {qn('id')} IN ({marks})",
                [TraceEvent.ARCHIVED, "maintenance", archived_at,
                 f"archived: finished more than {retention_days} days ago", *ids],
            )
        Message.objects.filter(id__in=ids).delete()
    return len(ids), ids[-1]


def archive_purge(
    *, now: datetime | None = None, batch: int = PURGE_BATCH, max_batches: int = PURGE_MAX_BATCHES
) -> int:
    """Delete archived messages (and their trace) older than MQ_ARCHIVE_RETENTION_DAYS.

    With the Parquet export on, only rows the export has already written are purged, so
    the history the reports read is never lost before it is on disk.
    """
    now = now or timezone.now()
    cutoff = now - timedelta(days=settings.MQ_ARCHIVE_RETENTION_DAYS)
    if settings.MQ_ARCHIVE_PARQUET_DIR:
        cutoff = min(cutoff, export_watermark())
    purged = 0
    for _ in range(max_batches):
        with transaction.atomic():
            ids = list(
                MessageArchive.objects.select_for_update(skip_locked=True)
                .filter(archived_at__lte=cutoff).order_by("archived_at", "id")
                .values_list("id", flat=True)[:batch]
            )
            if not ids:
                break
            MessageTrace.objects.filter(message_id__in=ids).delete()
            MessageArchive.objects.filter(id__in=ids).delete()
        purged += len(ids)
        if len(ids) < batch:
            break
    return purged


# --- Parquet export ----------------------------------------------------------------------

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def export_watermark() -> datetime:
    """Archived rows up to this archived_at are in Parquet files."""
    state = MaintenanceRun.objects.filter(job="export").first()
    return EPOCH + timedelta(microseconds=state.cursor if state else 0)


def archive_export(*, now: datetime | None = None, max_rows: int = EXPORT_MAX_ROWS) -> dict[str, int]:
    """Append the rows archived since the last export to Parquet (incremental, bounded).

    Layout under MQ_ARCHIVE_PARQUET_DIR (Hive-style partitions, read as one dataset by
    Spark or pyarrow; the partition values are in the folder names, not in the files):
      messages/day=YYYY-MM-DD/topic=<name>/part-<watermark>.parquet   (day of archived_at)
      traces/day=YYYY-MM-DD/topic=<name>/part-<watermark>.parquet     (those messages' trace)
    Each run adds one file per partition it touches, named after the watermark it started
    from: a run that crashed before recording its progress is redone into the same file
    names, so nothing is exported twice. Runs take turns on the export row's lock. Rows
    archived in the last MQ_ARCHIVE_EXPORT_SETTLE_SECONDS wait for the next run, leaving
    concurrent archive batches time to commit.
    """
    root = settings.MQ_ARCHIVE_PARQUET_DIR
    totals = {"messages": 0, "traces": 0, "files": 0}
    if not root:
        return totals
    now = now or timezone.now()
    MaintenanceRun.objects.get_or_create(job="export")
    with transaction.atomic():
        state = MaintenanceRun.objects.select_for_update().get(job="export")
        since = EPOCH + timedelta(microseconds=state.cursor)
        until = now - timedelta(seconds=settings.MQ_ARCHIVE_EXPORT_SETTLE_SECONDS)
        if until <= since:
            return totals
        reached, per_day = _export_window(Path(root), since, until, max_rows, totals)
        MaintenanceRun.objects.filter(pk=state.pk).update(cursor=_micros(reached))
        for day, (messages, traces) in per_day.items():
            ArchiveExport.objects.get_or_create(day=day, defaults={"exported_at": now})
            ArchiveExport.objects.filter(day=day).update(
                messages=F("messages") + messages, traces=F("traces") + traces, exported_at=now,
            )
        ArchiveExport.objects.filter(day__lt=reached.date(), complete=False).update(complete=True)
    return totals


def _micros(moment: datetime) -> int:
    delta = moment - EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def _export_window(
    root: Path, since: datetime, until: datetime, max_rows: int, totals: dict[str, int]
) -> tuple[datetime, dict[date, tuple[int, int]]]:
    """Write rows with since < archived_at <= until (stopping after about max_rows, at a
    batch boundary). Returns the archived_at reached and per-day counts."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    part = f"part-{_micros(since)}.parquet"
    writers: dict[tuple[str, date, str], tuple[Any, Path, Path]] = {}
    per_day: dict[date, list[int]] = {}
    schemas = {"messages": _message_schema(), "traces": _trace_schema()}

    def write(kind: str, day: date, topic: str, records: list[dict[str, Any]]) -> None:
        key = (kind, day, topic)
        if key not in writers:
            folder = root / kind / f"day={day.isoformat()}" / f"topic={topic}"
            folder.mkdir(parents=True, exist_ok=True)
            temp = folder / f".{part}.{uuid.uuid4().hex[:8]}"
            writers[key] = (pq.ParquetWriter(str(temp), schemas[kind]), temp, folder / part)
        writers[key][0].write_table(pa.Table.from_pylist(records, schema=schemas[kind]))
        per_day.setdefault(day, [0, 0])[0 if kind == "messages" else 1] += len(records)
        totals[kind] += len(records)

    reached = until
    done = False
    position: tuple[datetime, int] | None = None
    rows_seen = 0
    try:
        while not done:
            rows = MessageArchive.objects.filter(archived_at__gt=since, archived_at__lte=until)
            if position is not None:
                rows = rows.filter(Q(archived_at__gt=position[0]) | Q(archived_at=position[0], id__gt=position[1]))
            chunk = list(rows.order_by("archived_at", "id")[:EXPORT_CHUNK])
            if not chunk:
                break
            if rows_seen + len(chunk) >= max_rows and len(chunk) == EXPORT_CHUNK:
                # Stop at a change of archived_at, so the watermark never splits a stamp.
                last_stamp = chunk[-1].archived_at
                kept = [r for r in chunk if r.archived_at < last_stamp]
                if kept:
                    chunk, reached, done = kept, kept[-1].archived_at, True
            rows_seen += len(chunk)
            position = (chunk[-1].archived_at, chunk[-1].id)
            groups: dict[tuple[date, str], list[MessageArchive]] = {}
            for row in chunk:
                groups.setdefault((row.archived_at.date(), row.topic), []).append(row)
            where = {row.id: (row.archived_at.date(), row.topic) for row in chunk}
            traces: dict[tuple[date, str], list[dict[str, Any]]] = {}
            for trace in MessageTrace.objects.filter(message_id__in=list(where)).order_by("message_id", "id"):
                traces.setdefault(where[trace.message_id], []).append(_trace_record(trace))
            for (day, topic), group in groups.items():
                write("messages", day, topic, [_message_record(r) for r in group])
            for (day, topic), records in traces.items():
                write("traces", day, topic, records)
    finally:
        for writer, _temp, _final in writers.values():
            writer.close()
    for _writer, temp, final in writers.values():
        os.replace(temp, final)
    totals["files"] += len(writers)
    return reached, {day: (counts[0], counts[1]) for day, counts in per_day.items()}


def _message_schema():  # type: ignore[no-untyped-def]
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    # No topic column: the topic is the partition folder's (topic=<name>), and a column of
    # the same name would clash with it when the directory is read as one dataset.
    return pa.schema([
        ("id", pa.int64()), ("group_name", pa.string()), ("data", pa.string()),
        ("key", pa.string()), ("headers", pa.string()), ("status", pa.string()), ("effect_time", ts),
        ("retry_remaining", pa.int32()), ("attempt", pa.int32()), ("timeout_seconds", pa.int32()),
        ("dedup_key", pa.string()), ("lease_owner", pa.string()), ("lease_expires_at", ts),
        ("last_log", pa.string()), ("add_time", ts), ("update_time", ts), ("archived_at", ts),
        # With add_time, the message's "produced" event; with lease_owner and attempt, its
        # last delivery's "pulled" event (no trace row holds them).
        ("producer", pa.string()),
        ("pulled_at", ts), ("pulled_rank", pa.int32()), ("pulled_total", pa.int32()),
        ("copied_at", ts),
    ])


def _trace_schema():  # type: ignore[no-untyped-def]
    import pyarrow as pa

    return pa.schema([
        ("id", pa.int64()), ("message_id", pa.int64()), ("event", pa.string()), ("actor", pa.string()),
        ("at", pa.timestamp("us", tz="UTC")), ("attempt", pa.int32()), ("rank", pa.int32()),
        ("total", pa.int32()), ("status_after", pa.string()), ("log", pa.string()),
    ])


def _message_record(row: MessageArchive) -> dict[str, Any]:
    import json

    record = {f: getattr(row, f) for f in ARCHIVE_FIELDS if f != "topic"}
    record["headers"] = json.dumps(row.headers or {}, separators=(",", ":"))
    record["archived_at"] = row.archived_at
    return record


def _trace_record(row: MessageTrace) -> dict[str, Any]:
    return {
        "id": row.id, "message_id": row.message_id, "event": row.event, "actor": row.actor, "at": row.at,
        "attempt": row.attempt, "rank": row.rank, "total": row.total, "status_after": row.status_after,
        "log": row.log,
    }
