"""Finishing deliveries: ack (success / fail with retry), lease extension, release.

A consumer "holds" a message while it is RUNNING with `lease_owner` = that consumer. Only
the holder changes a message; anything else is answered `stale` and only traced.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from messages.batches.progress import batch_wakes, batches_finished
from messages.delivery import lifecycle, sql, sql_many
from messages.delivery.trace import TraceRow, holds_ack, trace_row, trace_write
from messages.models import Message, MessageTrace, Status, TraceEvent
from messages.stats.live import live_moved
from mqcenter.core import metrics
from mqcenter.core.auth import Principal
from mqcenter.core.db import retry_on_lock_conflict
from mqcenter.core.errors import Forbidden
from topics.cache import topic_cache
from topics.models import Topic

MAX_EXTEND_SECONDS = 12 * 3600
# What an ack reads of a message (under its row lock).
ACK_FIELDS = ("id", "topic", "group_name", "status", "lease_owner", "attempt", "retry_remaining", "effect_time",
              "batch_id", "pulled_at", "pulled_rank", "pulled_total")

OUTCOME_OF_EVENT = {
    TraceEvent.ACKED: "success",
    TraceEvent.RETRY_SCHEDULED: "retry_scheduled",
    TraceEvent.DEAD: "failed",
}


@dataclass(frozen=True)
class AckResult:
    id: int
    status: str  # SUCCESS, FAIL or RETRY (a snooze)
    log: str = ""
    retry: bool = True  # False: fail permanently (an extension of API.md's ack)
    delay_seconds: float | None = None  # RETRY: deliver again after this, no retry spent


@dataclass
class AckWork:
    """Results applied inside a transaction, and what is left for after its commit."""

    outcomes: list[dict[str, Any]]
    messages: dict[int, Message] = field(default_factory=dict)
    topics: dict[str, Topic] = field(default_factory=dict)
    succeeded: dict[int, Message] = field(default_factory=dict)
    failures: list[lifecycle.Failure] = field(default_factory=list)
    snoozes: list[tuple[Message, float, str]] = field(default_factory=list)
    clean: tuple[str, str, int] | None = None  # (topic, group, count) of a clean batch ack


@retry_on_lock_conflict
def messages_ack(*, principal: Principal, consumer: str, results: list[AckResult]) -> list[dict[str, Any]]:
    """Apply a consumer's results in one transaction; one outcome per result, in order.

    success / retry_scheduled / failed change the message (a RETRY result, a snooze, is
    `retry_scheduled` without spending a retry); `stale` (not held by this
    consumer any more) changes nothing but the trace. Acking the same result twice returns
    the first outcome again: the message's last event is this consumer's ack.
    """
    now = timezone.now()
    with batch_wakes(), sql.short_transaction():  # a completed batch's callback wakes after the commit
        work = acks_apply(principal=principal, consumer=consumer, results=results, now=now)
    return acks_committed(work)


def acks_apply(*, principal: Principal, consumer: str, results: list[AckResult], now: datetime) -> AckWork:
    """`messages_ack`'s changes, inside the caller's transaction; `acks_committed` after it."""
    # Not `data`: it may be 256 KiB a message.
    messages = {m.id: m for m in sql.locked_by_id({r.id for r in results}, ACK_FIELDS)}
    topics = topic_cache.get_many({m.topic for m in messages.values()})
    if principal.biz_ids is not None:  # another line's message answers as a missing one: stale
        messages = {i: m for i, m in messages.items() if _reaches(principal, topics.get(m.topic))}
    _require_consume(principal, messages.values(), results, topics)
    work = AckWork([], messages, topics)
    logs: dict[int, str] = {}
    traces: list[TraceRow] = []
    for result in results:
        message = messages.get(result.id)
        if message is None:
            work.outcomes.append({"id": result.id, "outcome": "stale"})
        elif message.status != Status.RUNNING or message.lease_owner != consumer:
            work.outcomes.append(_repeat_or_stale(message, consumer, result, traces, now))
        elif result.status == Status.SUCCESS:
            work.succeeded[message.id], logs[message.id] = message, result.log
            work.outcomes.append({"id": message.id, "outcome": "success"})
        elif result.status == "RETRY":
            work.snoozes.append((message, result.delay_seconds or 0.0, result.log))
            work.outcomes.append({"id": message.id})  # filled in below
        else:
            work.failures.append(lifecycle.Failure(message, topics.get(message.topic), consumer, result.log,
                                                   result.retry))
            work.outcomes.append({"id": message.id})  # filled in below
    traces += lifecycle.succeed(list(work.succeeded.values()), consumer=consumer, logs=logs, now=now)
    traces += lifecycle.fail(work.failures, expired=False, now=now)
    batches_finished([*work.succeeded.values(), *(f.message for f in work.failures)], now=now)
    traces += lifecycle.snooze(work.snoozes, consumer=consumer, now=now)
    trace_write(traces)
    return work


def acks_carried(
    *, principal: Principal, topic: str, group: str, consumer: str, results: list[AckResult], now: datetime
) -> AckWork:
    """The results a pull of (`topic`, `group`) carries, applied inside its claim's
    transaction (one commit for both); `acks_committed` after it.

    A steady consumer's acks are all clean (SUCCESS, no log, of messages of the group it
    pulls and still holds): then one guarded UPDATE, nothing read first, and no trace row
    for a first delivery (`sql_many.succeed_held`). Only when the count of rows changed
    disagrees, or a result is not a clean success, do the others take `acks_apply`'s path,
    row by row under their locks.
    """
    clean = [r.id for r in results if r.status == Status.SUCCESS and not r.log]
    done: set[int] = set()
    if clean:
        unique = set(clean)
        changed = sql_many.succeed_held(sorted(unique), topic=topic, group=group, owner=consumer, now=now)
        done = unique if changed == len(unique) else sql_many.succeeded_now(sorted(unique), owner=consumer, now=now)
    rest = [r for r in results if r.id not in done]
    work = acks_apply(principal=principal, consumer=consumer, results=rest, now=now) if rest else AckWork([])
    if not done:
        return work
    work.clean = (topic, group, len(done))
    others = iter(work.outcomes)  # in the order of `rest`
    work.outcomes = [{"id": r.id, "outcome": "success"} if r.id in done else next(others) for r in results]
    return work


def acks_committed(work: AckWork) -> list[dict[str, Any]]:
    """After the commit of `acks_apply` / `acks_carried`: wake-ups, live counters, metrics;
    answers the outcomes."""
    again = [*(f.message for f in work.failures), *(m for m, _, _ in work.snoozes)]
    lifecycle.wake_after_commit(again)  # committed, or at the caller's commit
    moved = [*((m.topic, m.group_name, Status.RUNNING, Status.SUCCESS) for m in work.succeeded.values()),
             *((f.message.topic, f.message.group_name, Status.RUNNING, f.message.status) for f in work.failures),
             *((m.topic, m.group_name, Status.RUNNING, Status.NEW) for m, _, _ in work.snoozes)]
    if work.clean is not None:
        topic, group, count = work.clean
        moved += [(topic, group, Status.RUNNING, Status.SUCCESS)] * count
        lifecycle.wake_freed_group(topic, group)
    live_moved(moved)
    lifecycle.wake_freed_slots([*work.succeeded.values(), *again], work.topics)
    for outcome in work.outcomes:
        if "outcome" not in outcome:
            outcome.update(_fail_outcome(work.messages[outcome["id"]]))
    for name, count in Counter(o["outcome"] for o in work.outcomes).items():
        metrics.acked.labels(name).inc(count)
    return work.outcomes


def _fail_outcome(message: Message) -> dict[str, Any]:
    if message.status == Status.NEW:
        return {"outcome": "retry_scheduled", "effect_time": message.effect_time}
    return {"outcome": "failed"}


def _reaches(principal: Principal, topic: Topic | None) -> bool:
    return principal.may_biz(topic.biz_id if topic is not None else None)


def _require_consume(
    principal: Principal, messages: Any, results: list[AckResult], topics: dict[str, Topic]
) -> None:
    index_of = {r.id: i for i, r in enumerate(results)}
    for message in messages:
        if not principal.may("consume", message.topic):
            raise Forbidden(
                f"This token has no consume scope for topic {message.topic!r}.",
                details={"field": f"results[{index_of[message.id]}].id", "topic": message.topic},
            )


def _held_in_reach(principal: Principal, held: list[Message]) -> list[Message]:
    """The held messages of the caller's business lines (another line's answer as missing:
    stale), after checking the consume scope on each of their topics."""
    if principal.biz_ids is not None:
        owners = dict(Topic.objects.filter(name__in={m.topic for m in held}).values_list("name", "biz_id"))
        held = [m for m in held if principal.may_biz(owners.get(m.topic))]
    for name in sorted({m.topic for m in held}):
        principal.require("consume", name)
    return held


def _repeat_or_stale(
    message: Message, consumer: str, result: AckResult, traces: list[TraceRow], now: datetime
) -> dict[str, Any]:
    """A repeated ack gets its first outcome again; anything else is stale.

    A consumer that keeps retrying an ack it no longer holds gets `stale` every time but
    leaves one `stale_ack` row, not one per retry: each row would lengthen the trace and the
    look-back below, which reads past stale rows (300 retries made each ack cost ~5 ms).
    """
    if holds_ack(message) and message.lease_owner == consumer:  # its "acked" event is its row
        return {"id": message.id, "outcome": "success"}
    newest = MessageTrace.objects.filter(message_id=message.id).order_by("-id").only("event", "actor").first()
    if newest is not None and newest.event == TraceEvent.STALE_ACK and newest.actor == consumer:
        return {"id": message.id, "outcome": "stale"}
    last = (
        MessageTrace.objects.filter(message_id=message.id)
        .exclude(event__in=[TraceEvent.STALE_ACK, TraceEvent.NACKED])
        .order_by("-id")
        .first()
    )
    if last is not None and last.actor == consumer and last.event in OUTCOME_OF_EVENT:
        outcome: dict[str, Any] = {"id": message.id, "outcome": OUTCOME_OF_EVENT[last.event]}
        if last.event == TraceEvent.RETRY_SCHEDULED and message.status == Status.NEW:
            outcome["effect_time"] = message.effect_time
        return outcome
    traces.append(
        trace_row(message, TraceEvent.STALE_ACK, at=now, actor=consumer,
                  log=f"{result.status}: {result.log}" if result.log else result.status)
    )
    return {"id": message.id, "outcome": "stale"}


@retry_on_lock_conflict
def messages_extend(
    *, principal: Principal, consumer: str, ids: list[int], seconds: int
) -> list[dict[str, Any]]:
    """Push out the leases `consumer` still holds; others answer `stale`."""
    now = timezone.now()
    expires = now + timedelta(seconds=min(seconds, MAX_EXTEND_SECONDS))
    with transaction.atomic():
        # Locked, so a lease the sweeper is taking back right now is not extended after it.
        held = list(
            Message.objects.select_for_update()
            .filter(id__in=ids, status=Status.RUNNING, lease_owner=consumer)
            .only("id", "topic", "status", "attempt")
        )
        held = _held_in_reach(principal, held)
        held_ids = {m.id for m in held}
        trace_write(lifecycle.extend(held, consumer=consumer, expires=expires, now=now))
    return [
        {"id": i, "lease_expires_at": expires} if i in held_ids else {"id": i, "outcome": "stale"}
        for i in ids
    ]


@retry_on_lock_conflict
def messages_release(*, principal: Principal, consumer: str, ids: list[int]) -> list[dict[str, Any]]:
    """Hand back messages pulled but not started: NEW at once, no retry spent, and the
    delivery does not count as an attempt."""
    now = timezone.now()
    with transaction.atomic():
        held = list(
            Message.objects.select_for_update().filter(id__in=ids, status=Status.RUNNING, lease_owner=consumer)
        )
        held = _held_in_reach(principal, held)
        trace_write(lifecycle.release(held, consumer=consumer, now=now))
        lifecycle.wake_after_commit(held)
        live_moved((m.topic, m.group_name, Status.RUNNING, Status.NEW) for m in held)
    released = {m.id for m in held}
    return [{"id": i, "outcome": "released" if i in released else "stale"} for i in ids]
