"""Every state change of a message, in one place.

    NEW --lease--> RUNNING --succeed--> SUCCESS
                   RUNNING --fail / lease expired--> NEW (a retry, later effect_time) or dead
                   RUNNING --release--> NEW (no retry spent)

The functions here write rows: the caller holds the rows' locks inside its transaction
(claims, acks) unless a function says it takes them itself (`leases_recover`).

A leased row holds its delivery's "pulled" event (`pulled_at`, the consumer's rank/total,
with `lease_owner` and `attempt`): no trace row is written per pull. A change that
supersedes that delivery (the next lease, a release) first writes it out as a trace row
(`trace.row_pulls_write`). Measured with `python -m bench.ab`: fewer trace rows per message
is worth ~5-9% end to end and MariaDB CPU per message.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from messages.batches.progress import batches_finished
from messages.delivery import sql, sql_many
from messages.delivery.retry import retry_delay_seconds
from messages.delivery.trace import (
    LOG_LIMIT,
    PULLED_FIELDS,
    TraceRow,
    holds_ack,
    row_pull,
    row_pulls_write,
    trace_row,
    trace_write,
)
from messages.models import Message, Status, TraceEvent
from messages.stats.live import live_moved
from mqcenter.core import metrics
from mqcenter.core.db import retry_on_lock_conflict
from registry.wakeups import wakeup_hub
from topics.cache import topic_cache
from topics.models import Topic


def lease_expiry(timeout_seconds: int, now: datetime) -> datetime:
    """When a lease taken `now` expires: the message's execution timeout plus a grace, so a
    consumer that enforces the timeout still reports the failure before the broker takes
    the message back."""
    return now + timedelta(seconds=timeout_seconds + settings.MQ_LEASE_GRACE_SECONDS)


def lease(
    rows: list[Message], *, consumer: str, rank: tuple[int | None, int | None], now: datetime
) -> list[Message]:
    """NEW rows (locked by the caller, or read without locks by a claim that serializes on
    its group) to RUNNING under `consumer`'s lease. One UPDATE per distinct timeout,
    conditional on status = NEW: a row another claimer took meanwhile is dropped. Returns
    the leased rows in id order, updated in memory as stored."""
    by_timeout: dict[int, list[Message]] = defaultdict(list)
    for row in rows:
        by_timeout[row.timeout_seconds].append(row)
    leased: list[Message] = []
    for timeout, group in by_timeout.items():
        expires = lease_expiry(timeout, now)
        ids = [row.id for row in group]
        dropped: set[int] = set()
        if sql.lease(ids, consumer, rank, expires, now) != len(ids):
            held = dict(
                Message.objects.filter(id__in=ids, status=Status.RUNNING, lease_expires_at=expires)
                .values_list("id", "lease_owner")
            )
            dropped = {i for i in ids if held.get(i) != consumer}
        kept = [row for row in group if row.id not in dropped]
        row_pulls_write(kept)  # the pulls of earlier deliveries these rows still hold
        for row in kept:
            row.status, row.lease_owner, row.lease_expires_at = Status.RUNNING, consumer, expires
            row.attempt += 1
            row.update_time = row.pulled_at = now
            row.pulled_rank, row.pulled_total = rank
        leased.extend(kept)
    return sorted(leased, key=lambda m: m.id)


def lease_many(
    assignments: list[tuple[list[Message], str, tuple[int | None, int | None]]], *, now: datetime
) -> list[list[Message]]:
    """`lease` for several consumers at once, each (rows, consumer, rank) its own rows
    (locked by the caller): on MySQL/MariaDB one UPDATE for all of them. Returns each
    consumer's leased rows, in the order given."""
    if not sql.is_mysql():
        return [lease(rows, consumer=consumer, rank=rank, now=now) for rows, consumer, rank in assignments]
    leases = [(row.id, consumer, rank, lease_expiry(row.timeout_seconds, now))
              for rows, consumer, rank in assignments for row in rows]
    dropped: set[int] = set()
    if sql_many.lease_many(leases, now) != len(leases):
        held = dict(Message.objects.filter(id__in=[i for i, _, _, _ in leases], status=Status.RUNNING, pulled_at=now)
                    .values_list("id", "lease_owner"))
        dropped = {i for i, owner, _, _ in leases if held.get(i) != owner}
    kept = [[row for row in rows if row.id not in dropped] for rows, _, _ in assignments]
    row_pulls_write(row for rows in kept for row in rows)  # the pulls of earlier deliveries these rows still hold
    expiry = {i: expires for i, _, _, expires in leases}
    for rows, (_, consumer, rank) in zip(kept, assignments, strict=True):
        for row in rows:
            row.status, row.lease_owner, row.lease_expires_at = Status.RUNNING, consumer, expiry[row.id]
            row.attempt += 1
            row.update_time = row.pulled_at = now
            row.pulled_rank, row.pulled_total = rank
    return kept


def succeed(messages: list[Message], *, consumer: str, logs: dict[int, str], now: datetime) -> list[TraceRow]:
    """RUNNING messages held by `consumer` to SUCCESS. Returns their trace rows to write:
    none for a first delivery's success without a log, which its row holds
    (`trace.holds_ack`). One with a log writes its pull out too and clears it from the
    row, so that its row does not hold a second "acked" event."""
    sql.finish((m.id for m in messages), Status.SUCCESS, now)
    traces = []
    for message in messages:
        message.status, message.update_time = Status.SUCCESS, now
        log = logs.get(message.id, "")
        if log:  # success logs are usually empty: write only those set
            message.last_log = log[:LOG_LIMIT]
            cleared = {}
            if holds_ack(message):
                traces.append(row_pull(message))
                cleared = dict.fromkeys(PULLED_FIELDS)
                message.pulled_at = message.pulled_rank = message.pulled_total = None
            Message.objects.filter(id=message.id).update(last_log=message.last_log, **cleared)
        if not holds_ack(message):
            traces.append(trace_row(message, TraceEvent.ACKED, at=now, actor=consumer, log=log))
    return traces


@dataclass(slots=True)
class Failure:
    """One delivery that failed: a consumer's FAIL, or a lease that expired."""

    message: Message
    topic: Topic | None  # None: the topic is gone, so no retry policy applies
    actor: str
    log: str
    retry: bool = True  # False: dead at once (the consumer failed it permanently)


def fail(failures: list[Failure], *, expired: bool, now: datetime) -> list[TraceRow]:
    """Failed deliveries: NEW again after the topic's retry delay while retries remain (one
    is spent), else dead: FAIL for a consumer's failure, TIMEOUT for an expired lease.
    Writes one UPDATE per distinct outcome and returns the trace rows to write."""
    dead_status = Status.TIMEOUT if expired else Status.FAIL
    updates: dict[tuple[str, datetime | None, str], list[int]] = defaultdict(list)
    traces: list[TraceRow] = []
    for failure in failures:
        message = failure.message
        last_log = message.last_log if expired else failure.log[:LOG_LIMIT]
        if not expired:
            traces.append(trace_row(message, TraceEvent.NACKED, at=now, actor=failure.actor, log=failure.log))
        if failure.retry and message.retry_remaining > 0 and failure.topic is not None:
            message.status = Status.NEW
            message.retry_remaining -= 1
            message.effect_time = now + timedelta(seconds=retry_delay_seconds(failure.topic, message.attempt))
            updates[(Status.NEW, message.effect_time, last_log)].append(message.id)
            event, log = TraceEvent.RETRY_SCHEDULED, f"retry at {message.effect_time.isoformat()}"
        else:
            message.status = dead_status
            updates[(dead_status, None, last_log)].append(message.id)
            event, log = TraceEvent.DEAD, "no retries left" if failure.retry else "failed permanently by the consumer"
        if expired:
            event, log = TraceEvent.LEASE_EXPIRED, f"lease of {message.lease_owner} expired; {log}"
        message.last_log, message.lease_expires_at, message.update_time = last_log, None, now
        traces.append(trace_row(message, event, at=now, actor=failure.actor, log=log))
    for (status, effect_time, last_log), ids in updates.items():
        changes: dict[str, object] = {"status": status, "lease_expires_at": None, "update_time": now,
                                      "last_log": last_log}
        if effect_time is not None:
            changes.update(effect_time=effect_time, retry_remaining=F("retry_remaining") - 1)
        Message.objects.filter(id__in=ids).update(**changes)
    return traces


def snooze(snoozes: list[tuple[Message, float, str]], *, consumer: str, now: datetime) -> list[TraceRow]:
    """RUNNING messages held by `consumer` (message, delay seconds, log) back to NEW after
    their delay, asked for by the consumer itself: no retry spent. The delivery still counts
    as an attempt; its pull stays on the row until the next lease writes it out, as after a
    failure. Returns the trace rows to write."""
    by_time: dict[tuple[datetime, str], list[int]] = defaultdict(list)
    traces = []
    for message, delay, log in snoozes:
        message.status, message.effect_time = Status.NEW, now + timedelta(seconds=delay)
        message.last_log, message.lease_expires_at, message.update_time = log[:LOG_LIMIT], None, now
        by_time[(message.effect_time, message.last_log)].append(message.id)
        traces.append(trace_row(message, TraceEvent.RETRY_SCHEDULED, at=now, actor=consumer,
                                log=f"snoozed until {message.effect_time.isoformat()}" + (f": {log}" if log else "")))
    for (effect_time, last_log), ids in by_time.items():
        Message.objects.filter(id__in=ids).update(status=Status.NEW, effect_time=effect_time, last_log=last_log,
                                                  lease_expires_at=None, update_time=now)
    return traces


def release(messages: list[Message], *, consumer: str, now: datetime) -> list[TraceRow]:
    """RUNNING messages held by `consumer` back to NEW at once: no retry spent, and the
    delivery does not count as an attempt."""
    row_pulls_write(messages)  # before their lease owner and attempt go
    Message.objects.filter(id__in=[m.id for m in messages]).update(
        status=Status.NEW, effect_time=now, lease_owner=None, lease_expires_at=None,
        attempt=F("attempt") - 1, update_time=now, pulled_at=None, pulled_rank=None, pulled_total=None,
    )
    for message in messages:
        message.status, message.attempt = Status.NEW, message.attempt - 1
    return [trace_row(m, TraceEvent.RELEASED, at=now, actor=consumer) for m in messages]


def extend(messages: list[Message], *, consumer: str, expires: datetime, now: datetime) -> list[TraceRow]:
    """Leases held by `consumer` (locked by the caller) run until `expires`."""
    Message.objects.filter(id__in=[m.id for m in messages]).update(lease_expires_at=expires, update_time=now)
    return [trace_row(m, TraceEvent.EXTENDED, at=now, actor=consumer, log=f"lease until {expires.isoformat()}")
            for m in messages]


def wake_after_commit(messages: Iterable[Message]) -> None:
    """Publish a wake hint, once the transaction commits, for the groups of these messages
    that are NEW again."""
    pairs = {(m.topic, m.group_name) for m in messages if m.status == Status.NEW}
    if pairs:
        transaction.on_commit(lambda: wakeup_hub().publish(pairs))


def wake_freed_slots(messages: Iterable[Message], topics: dict[str, Topic]) -> None:
    """Publish a wake hint, once the transaction commits, for the groups with a
    `max_in_flight` in which these messages stopped running: a slot is free."""
    pairs = set()
    for message in messages:
        topic = topics.get(message.topic)
        group = topic.group_rows.get(message.group_name) if topic is not None else None  # type: ignore[attr-defined]
        if group is not None and group.max_in_flight is not None:
            pairs.add((message.topic, message.group_name))
    if pairs:
        transaction.on_commit(lambda: wakeup_hub().publish(pairs))


def wake_freed_group(topic: str, group: str) -> None:
    """`wake_freed_slots` for messages of one (topic, group) that stopped running."""
    topic_row = topic_cache.get(topic)
    group_row = topic_row.group_rows.get(group) if topic_row is not None else None  # type: ignore[attr-defined]
    if group_row is not None and group_row.max_in_flight is not None:
        transaction.on_commit(lambda: wakeup_hub().publish({(topic, group)}))


@retry_on_lock_conflict
def leases_recover(*, limit: int = 500) -> int:
    """Take back messages whose lease expired (see `fail`). Bounded and idempotent; SKIP
    LOCKED lets every broker process run it at once. Returns how many were recovered."""
    now = timezone.now()
    # Find candidates with a plain read, then lock them by primary key: a locking scan of the
    # (status, id) index would take locks on the very entries concurrent acks are changing
    # (MariaDB waits on the row behind a secondary entry even under SKIP LOCKED).
    ids = list(
        Message.objects.filter(status=Status.RUNNING, lease_expires_at__lt=now)
        .order_by("id").values_list("id", flat=True)[:limit]
    )
    if not ids:
        return 0
    with transaction.atomic():
        # Only what recovery reads (`data` may be 256 KiB a row), re-checked under the lock.
        expired = list(
            Message.objects.select_for_update(skip_locked=True)
            .filter(id__in=ids, status=Status.RUNNING, lease_expires_at__lt=now)
            .only("id", "topic", "group_name", "status", "retry_remaining", "attempt", "lease_owner", "last_log",
                  "batch_id")
            .order_by("id")
        )
        if not expired:
            return 0
        topics = {t.name: t for t in Topic.objects.filter(name__in={m.topic for m in expired})}
        trace_write(fail([Failure(m, topics.get(m.topic), "broker", "") for m in expired], expired=True, now=now))
        batches_finished(expired, now=now)
        wake_after_commit(expired)
        live_moved((m.topic, m.group_name, Status.RUNNING, m.status) for m in expired)
    metrics.leases_expired.inc(len(expired))
    return len(expired)
