"""Finishing deliveries: ack (success / fail with retry), lease extension, release.

A consumer "holds" a message while it is RUNNING with `lease_owner` = that consumer. Only
the holder changes a message; anything else is answered `stale` and only traced.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from messages.delivery import lifecycle, sql
from messages.delivery.trace import TraceRow, trace_row, trace_write
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
ACK_FIELDS = ("id", "topic", "group_name", "status", "lease_owner", "attempt", "retry_remaining", "effect_time")

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


@retry_on_lock_conflict
def messages_ack(*, principal: Principal, consumer: str, results: list[AckResult]) -> list[dict[str, Any]]:
    """Apply a consumer's results in one transaction; one outcome per result, in order.

    success / retry_scheduled / failed change the message (a RETRY result, a snooze, is
    `retry_scheduled` without spending a retry); `stale` (not held by this
    consumer any more) changes nothing but the trace. Acking the same result twice returns
    the first outcome again: the message's last event is this consumer's ack.
    """
    now = timezone.now()
    with sql.short_transaction():
        # Not `data`: it may be 256 KiB a message.
        messages = {m.id: m for m in sql.locked_by_id({r.id for r in results}, ACK_FIELDS)}
        topics = topic_cache.get_many({m.topic for m in messages.values()})
        if principal.biz_ids is not None:  # another line's message answers as a missing one: stale
            messages = {i: m for i, m in messages.items() if _reaches(principal, topics.get(m.topic))}
        _require_consume(principal, messages.values(), results, topics)
        outcomes: list[dict[str, Any]] = []
        succeeded: dict[int, Message] = {}
        logs: dict[int, str] = {}
        failures: list[lifecycle.Failure] = []
        snoozes: list[tuple[Message, float, str]] = []
        traces: list[TraceRow] = []
        for result in results:
            message = messages.get(result.id)
            if message is None:
                outcomes.append({"id": result.id, "outcome": "stale"})
            elif message.status != Status.RUNNING or message.lease_owner != consumer:
                outcomes.append(_repeat_or_stale(message, consumer, result, traces, now))
            elif result.status == Status.SUCCESS:
                succeeded[message.id], logs[message.id] = message, result.log
                outcomes.append({"id": message.id, "outcome": "success"})
            elif result.status == "RETRY":
                snoozes.append((message, result.delay_seconds or 0.0, result.log))
                outcomes.append({"id": message.id})  # filled in below
            else:
                failures.append(lifecycle.Failure(message, topics.get(message.topic), consumer, result.log,
                                                  result.retry))
                outcomes.append({"id": message.id})  # filled in below
        traces += lifecycle.succeed(list(succeeded.values()), consumer=consumer, logs=logs, now=now)
        traces += lifecycle.fail(failures, expired=False, now=now)
        traces += lifecycle.snooze(snoozes, consumer=consumer, now=now)
        trace_write(traces)
    again = [*(f.message for f in failures), *(m for m, _, _ in snoozes)]
    lifecycle.wake_after_commit(again)  # committed, or at the caller's commit
    live_moved([*((m.topic, m.group_name, Status.RUNNING, Status.SUCCESS) for m in succeeded.values()),
                *((f.message.topic, f.message.group_name, Status.RUNNING, f.message.status) for f in failures),
                *((m.topic, m.group_name, Status.RUNNING, Status.NEW) for m, _, _ in snoozes)])
    lifecycle.wake_freed_slots([*succeeded.values(), *again], topics)
    for outcome in outcomes:
        if "outcome" not in outcome:
            outcome.update(_fail_outcome(messages[outcome["id"]]))
    for name, count in Counter(o["outcome"] for o in outcomes).items():
        metrics.acked.labels(name).inc(count)
    return outcomes


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


def acks_before_pull(
    *, principal: Principal, topic: str, consumer: str, results: list[AckResult] | None
) -> list[dict[str, Any]] | None:
    """Apply the results a pull carries (an extension of API.md), before it claims; None when
    it carries none. A busy consumer's acks then ride on its next pull instead of a request
    of their own: a draining SDK consumer then makes ~1.6 requests per 100 messages instead
    of ~3, and a request costs the broker ~1 ms of CPU before its own work. The pull's scope
    is checked first, so a pull that will be refused acks nothing."""
    if not results:
        return None
    principal.require("consume", topic)
    return messages_ack(principal=principal, consumer=consumer, results=results)


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
