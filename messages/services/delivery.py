"""Delivery: claim messages for a consumer, long-poll for them, recover expired leases.

Locking rules (MySQL/MariaDB at READ COMMITTED, PostgreSQL; SQLite serializes writers):
- `queue` claims take rows with `SELECT ... FOR UPDATE SKIP LOCKED`: concurrent claimers
  skip each other's rows instead of waiting, and never see the same row.
- `serial` and `sharded` claims first lock their group's row in `topics_topicgroup`, so
  the "who is first / which key is free" decision is made by one claimer at a time.
- Every claim is one short transaction; nothing waits while holding a lock.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Min
from django.utils import timezone

from messages import sql
from messages.models import Message, Status, TraceEvent
from messages.services.handoff import handoffs
from messages.services.retry import retry_delay_seconds
from messages.services.trace import row_pulls_write, trace_row, trace_write
from mqcenter.core import metrics
from mqcenter.core.auth import Principal
from mqcenter.core.db import retry_on_lock_conflict
from registry.services import rank_cache
from registry.wakeups import LoopEvent, Wake, wakeup_hub
from topics.cache import topic_cache
from topics.models import DeliveryMode, Topic, TopicGroup
from topics.services import group_ensure, topic_require_biz

# A waiting pull keeps its database connection only while few pulls wait in this process;
# beyond that it hands the connection back, so a thousand long-polls hold no connections.
MAX_IDLE_CONNECTIONS = 16
# And at most this many pulls of a process use the database at once: a thousand long-polls
# arriving (or woken) together must not open a thousand connections (max_connections).
CLAIM_SLOTS = threading.BoundedSemaphore(32)
# Runs a blocking call (one that may use the database) on a thread, for a coroutine.
RunBlocking = Callable[..., Awaitable[Any]]
# How often this process sweeps a group's expired leases from the claim path.
RECOVERY_INTERVAL_SECONDS = 1.0
# Sharded claims look this many times further down the backlog for keys that are free.
SHARD_LOOKAHEAD = 4


def messages_pull(
    *,
    principal: Principal,
    topic: str,
    group: str,
    consumer: str,
    max_messages: int,
    wait_seconds: float,
) -> list[Message]:
    """Claim up to `max_messages`, waiting up to `wait_seconds` for the first one.

    Registers for wake-ups before each database check so a produce that commits between
    the check and the wait is not missed; a short fallback poll covers lost wake-ups and
    delayed messages coming due.
    """
    principal.require("consume", topic)
    started = time.monotonic()
    deadline = started + wait_seconds
    hub = wakeup_hub()
    with hub.waiter(topic, group) as wake:
        while True:
            wake.clear()
            messages, next_due = messages_claim(
                principal=principal, topic=topic, group=group, consumer=consumer, max_messages=max_messages,
            )
            remaining = deadline - time.monotonic()
            if not messages and remaining > 0 and hub.waiting_count() > MAX_IDLE_CONNECTIONS \
                    and not connection.in_atomic_block:
                connection.close()
            if messages or remaining <= 0:
                return _pulled(topic, group, messages, started, wake_more=len(messages) >= max_messages)
            wake.wait(_wait_timeout(remaining, next_due))


async def messages_pull_async(
    *,
    principal: Principal,
    topic: str,
    group: str,
    consumer: str,
    max_messages: int,
    wait_seconds: float,
    run: RunBlocking,
) -> list[Message]:
    """`messages_pull` for a coroutine: the same claims, but the wait holds no thread and
    no database connection, and a wake-up costs a callback on the event loop instead of
    a sleeping thread. `run(fn, *args)` runs a blocking call on a thread that may use
    the database."""
    principal.require("consume", topic)
    started = time.monotonic()
    deadline = started + wait_seconds
    hub = wakeup_hub()
    with hub.waiter(topic, group, LoopEvent(asyncio.get_running_loop())) as wake:
        while True:
            wake.clear()
            # The usual case needs no thread until the combined claim: a thousand woken pulls
            # would otherwise queue a thousand hops ahead of the one claim that serves them.
            claimed = None if _combined_claim_ready(principal, topic, group) else \
                await run(_claim_uncombined, principal, topic, group, consumer, max_messages)
            if claimed is None:
                # Shielded: a pull cancelled while queued must still pass on the lead.
                claimed = await asyncio.shield(queue_claims.claim_async(topic, group, consumer, max_messages, run))
            messages, next_due = claimed
            remaining = deadline - time.monotonic()
            if messages or remaining <= 0:
                return _pulled(topic, group, messages, started, wake_more=len(messages) >= max_messages)
            # Idle: open to a produce's hand-off while waiting (see `handoff`).
            handed = await handoffs.wait(
                (topic, group), principal, consumer, max_messages, wake, _wait_timeout(remaining, next_due)
            )
            if handed:
                # The produce woke pulls for whatever it did not hand off.
                return _pulled(topic, group, handed, started, wake_more=False)


def _wait_timeout(remaining: float, next_due: datetime | None) -> float:
    """How long an empty pull sleeps before checking again, wake-ups aside."""
    timeout = min(remaining, wakeup_hub().fallback_seconds())
    if next_due is not None:
        due_in = (next_due - timezone.now()).total_seconds()
        timeout = max(0.0, min(timeout, due_in + 0.002))
    return timeout


def _pulled(topic: str, group: str, messages: list[Message], started: float, *, wake_more: bool) -> list[Message]:
    metrics.pull_wait.observe(time.monotonic() - started)
    if messages:
        metrics.delivered.labels(topic, group).inc(len(messages))
    if wake_more:
        # A full pull means there may be more: wake two more waiters (queue claims also fan
        # out per combined round, COMBINED_FANOUT).
        wakeup_hub().notify_local([(topic, group)], limit=2)
    return messages


def messages_claim(
    *, principal: Principal, topic: str, group: str, consumer: str, max_messages: int
) -> tuple[list[Message], datetime | None]:
    """One claim attempt. Returns the leased messages and, when there are none, when the
    next delayed message of the group comes due (None if unknown or nothing is delayed)."""
    claimed = _claim_uncombined(principal, topic, group, consumer, max_messages)
    # Outside the slot: a pull queued behind another's claim holds no database connection.
    return claimed if claimed is not None else queue_claims.claim(topic, group, consumer, max_messages)


def _combined_claim_ready(principal: Principal, topic: str, group: str) -> bool:
    """Whether `_claim_uncombined` would answer None (a queue claim, to combine) without
    reading the database: the topic and group are remembered, the group is in queue mode
    and its leases are not due for recovery. Raises Forbidden as it would."""
    topic_row = topic_cache.peek(topic)
    if topic_row is None:
        return False
    topic_require_biz(principal, topic_row)
    topic_group = topic_row.group_rows.get(group)  # type: ignore[attr-defined]
    return (
        not topic_row.paused and topic_group is not None and topic_group.mode == DeliveryMode.QUEUE
        and not _recovery_due(topic, group)
    )


def _claim_uncombined(
    principal: Principal, topic: str, group: str, consumer: str, max_messages: int
) -> tuple[list[Message], datetime | None] | None:
    """`messages_claim` up to the combined queue claim: the answer, or None when this is a
    queue claim for `queue_claims` to combine with the other pulls of its group."""
    with CLAIM_SLOTS:
        topic_row = topic_cache.get(topic)
        if topic_row is None:
            return [], None  # consumers may start before anyone produced
        topic_require_biz(principal, topic_row)
        if topic_row.paused:
            return [], None
        topic_group = topic_row.group_rows.get(group)  # type: ignore[attr-defined]
        if topic_group is None:
            topic_group = group_ensure(topic=topic_row, name=group)
            topic_group.topic = topic_row
        _recover_group_leases(topic, group)
        if topic_group.mode != DeliveryMode.QUEUE:
            now = timezone.now()
            rank, total = rank_cache.rank(consumer, topic, group)
            if topic_group.mode == DeliveryMode.SERIAL:
                claimed = _claim_serial(topic_group, consumer, now, rank, total)
            else:
                claimed = _claim_sharded(topic_group, consumer, max_messages, now, rank, total)
            return (claimed, None) if claimed else ([], sql.next_due(topic, group, now))
        if connection.in_atomic_block:
            # Inside the caller's transaction the claim must be the caller's own: no combining.
            ask = _Ask(consumer, max_messages)
            _claim_queue(topic, group, [ask])
            return ask.messages, ask.next_due
    return None


# --- combined queue claims ---------------------------------------------------------------
# When a produce wakes many waiting pulls of one group, claiming one by one costs each pull a
# connection, a locking SELECT, an UPDATE (then also a trace INSERT) and a commit: a thousand woken
# pulls took ~10 s in one process. Instead one pull per (topic, group) and process leads: it
# claims for itself and for every pull queued behind it in one transaction, and hands each
# its share. A lone pull leads at once, so it costs what it did before.

# A combined claim takes at most this many messages; the pulls beyond wait for the next round.
COMBINED_CLAIM_MESSAGES = 1000
# A round that filled every pull it served wakes this many more waiters per pull served: a big
# produce reaches a thousand waiters in ~3 rounds, and one message does not wake them all.
COMBINED_FANOUT = 8


class _Ask:
    """One pull's place in a combined claim, and the answer its leader leaves there."""

    __slots__ = ("consumer", "done", "error", "lead", "limit", "messages", "next_due")

    def __init__(self, consumer: str, limit: int, done: Wake | None = None) -> None:
        self.consumer, self.limit = consumer, limit
        self.done = threading.Event() if done is None else done
        self.lead = False  # set with `done` instead of an answer: this pull leads next
        self.messages: list[Message] = []
        self.next_due: datetime | None = None
        self.error: BaseException | None = None

    def answer(self) -> tuple[list[Message], datetime | None]:
        if self.error is not None:
            raise self.error
        return self.messages, self.next_due


class QueueClaims:
    """The queue-mode claims of this process, combined per (topic, group)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queued: dict[tuple[str, str], list[_Ask]] = {}
        self._leading: set[tuple[str, str]] = set()

    def claim(self, topic: str, group: str, consumer: str, limit: int) -> tuple[list[Message], datetime | None]:
        pair = (topic, group)
        ask = self._enqueue(pair, _Ask(consumer, limit))
        while True:
            if ask.lead:
                ask.lead = False
                self._lead(pair)
            ask.done.wait()
            if ask.lead:  # handed the lead, not an answer
                ask.done.clear()
                continue
            return ask.answer()

    async def claim_async(
        self, topic: str, group: str, consumer: str, limit: int, run: RunBlocking
    ) -> tuple[list[Message], datetime | None]:
        """`claim` for a coroutine: it waits for its answer on the event loop, and only a
        pull that leads a round takes a thread."""
        pair = (topic, group)
        ask = self._enqueue(pair, _Ask(consumer, limit, LoopEvent(asyncio.get_running_loop())))
        while True:
            if ask.lead:
                ask.lead = False
                await run(self._lead, pair)
            await ask.done.wait()
            if ask.lead:
                ask.done.clear()
                continue
            return ask.answer()

    def _enqueue(self, pair: tuple[str, str], ask: _Ask) -> _Ask:
        with self._lock:
            self._queued.setdefault(pair, []).append(ask)
            ask.lead = pair not in self._leading
            self._leading.add(pair)
        return ask

    def _lead(self, pair: tuple[str, str]) -> None:
        """One combined round, then the lead passes to the oldest queued pull. The leader is
        always first in the queue (a new leader finds it empty; a handed lead goes to its
        head), so its own answer comes from this round and never waits behind others'."""
        try:
            batch = self._take(pair)
            try:
                with CLAIM_SLOTS:
                    filled = _claim_queue(*pair, batch)
            except BaseException as exc:  # every pull of the round gets the error; none hangs
                for ask in batch:
                    ask.error = exc
                    ask.done.set()
                raise
            if filled:
                wakeup_hub().notify_local([pair], limit=COMBINED_FANOUT * len(batch))
        finally:
            with self._lock:
                queued = self._queued.get(pair)
                if queued:
                    queued[0].lead = True
                    queued[0].done.set()
                else:
                    self._queued.pop(pair, None)
                    self._leading.discard(pair)

    def _take(self, pair: tuple[str, str]) -> list[_Ask]:
        """The queued pulls, oldest first, up to COMBINED_CLAIM_MESSAGES (at least one)."""
        with self._lock:
            queued = self._queued[pair]
            taken, wanted = 0, 0
            while taken < len(queued) and (taken == 0 or wanted + queued[taken].limit <= COMBINED_CLAIM_MESSAGES):
                wanted += queued[taken].limit
                taken += 1
            batch, self._queued[pair] = queued[:taken], queued[taken:]
        return batch


queue_claims = QueueClaims()


@retry_on_lock_conflict
def _claim_queue(topic: str, group: str, asks: list[_Ask]) -> bool:
    """Claim for every ask in one transaction, in queue order, and answer each. Returns
    whether every ask got all it asked for (so more may be waiting)."""
    now = timezone.now()
    with transaction.atomic():
        rows = sql.claimable_rows(topic, group, now, sum(ask.limit for ask in asks), lock=True)
        shares, start = [], 0
        for ask in asks:
            shares.append(rows[start:start + ask.limit])
            start += ask.limit
        consumers = [ask.consumer for ask in asks]
        ranks = {consumer: rank_cache.rank(consumer, topic, group) for consumer in consumers}
        shares = _lease_shares(consumers, ranks, shares, now)
    next_due = None if all(shares) else sql.next_due(topic, group, now)
    filled = True
    for ask, share in zip(asks, shares, strict=True):
        ask.messages, ask.next_due = share, (None if share else next_due)
        filled = filled and len(share) == ask.limit
        ask.done.set()
    return filled


@retry_on_lock_conflict
def _claim_serial(
    topic_group: TopicGroup, consumer: str, now: datetime, rank: int | None, total: int | None
) -> list[Message]:
    """The group's lowest-id unfinished message, once nothing of the group is running."""
    with transaction.atomic():
        TopicGroup.objects.select_for_update().filter(pk=topic_group.pk).values_list("pk").first()
        if sql.group_head(topic_group.topic.name, topic_group.name, Status.RUNNING) is not None:
            return []
        head = sql.group_head(topic_group.topic.name, topic_group.name, Status.NEW)
        if head is None or head.effect_time > now:
            return []  # an earlier message waits for its retry: order beats throughput
        return _lease([head], consumer, (rank, total), now)


@retry_on_lock_conflict
def _claim_sharded(
    topic_group: TopicGroup, consumer: str, limit: int, now: datetime, rank: int | None, total: int | None
) -> list[Message]:
    """Deliverable messages whose key has nothing running and nothing earlier waiting."""
    scope = {"topic": topic_group.topic.name, "group_name": topic_group.name}
    with transaction.atomic():
        TopicGroup.objects.select_for_update().filter(pk=topic_group.pk).values_list("pk").first()
        candidates = sql.claimable_rows(
            topic_group.topic.name, topic_group.name, now, limit * SHARD_LOOKAHEAD, lock=False
        )
        keys = {m.key for m in candidates if m.key is not None}
        busy = set(
            Message.objects.filter(key__in=keys, **scope, status=Status.RUNNING).values_list("key", flat=True)
        ) if keys else set()
        heads = dict(
            Message.objects.filter(key__in=keys, **scope, status=Status.NEW)
            .values("key").annotate(head=Min("id")).values_list("key", "head")
        ) if keys else {}
        chosen: list[Message] = []
        for message in candidates:
            if message.key is not None:
                if message.key in busy or heads.get(message.key) != message.id:
                    continue
                busy.add(message.key)
            chosen.append(message)
            if len(chosen) == limit:
                break
        return _lease(chosen, consumer, (rank, total), now)


def _lease(
    rows: list[Message], consumer: str, rank: tuple[int | None, int | None], now: datetime
) -> list[Message]:
    """Move locked NEW rows to RUNNING under `consumer`'s lease (see `_lease_shares`)."""
    return _lease_shares([consumer], {consumer: rank}, [rows], now)[0]


def _lease_shares(
    consumers: list[str], ranks: dict[str, tuple[int | None, int | None]], shares: list[list[Message]],
    now: datetime,
) -> list[list[Message]]:
    """Move locked NEW rows to RUNNING, each share under its consumer's lease (call inside the
    claim's transaction): one UPDATE per distinct timeout, however many consumers. The UPDATE
    is conditional on status=NEW: a row that changed since it was read (only possible without
    row locks) is dropped from its share.

    Each row then holds its delivery's "pulled" event (`Message.pulled_at`, with the
    consumer's rank/total from `ranks`): no trace row is written for it. A row still holding
    the pull of an earlier delivery (nacked, expired, edited since) has it written out first."""
    owner = {row.id: consumer for consumer, share in zip(consumers, shares, strict=True) for row in share}
    by_timeout: dict[int, list[Message]] = defaultdict(list)
    for share in shares:
        for row in share:
            by_timeout[row.timeout_seconds].append(row)
    dropped: set[int] = set()
    for timeout, rows in by_timeout.items():
        expires = now + timedelta(seconds=timeout + settings.MQ_LEASE_GRACE_SECONDS)
        ids = [row.id for row in rows]
        ids_of: dict[str, list[int]] = defaultdict(list)
        for i in ids:
            ids_of[owner[i]].append(i)
        if sql.lease(ids_of, ranks, expires, now) != len(ids):  # another writer got some of them first
            held = dict(
                Message.objects.filter(id__in=ids, status=Status.RUNNING, lease_expires_at=expires)
                .values_list("id", "lease_owner")
            )
            dropped.update(i for i in ids if held.get(i) != owner[i])
        row_pulls_write(row for row in rows if row.id not in dropped)
        for row in rows:
            row.status, row.lease_owner, row.lease_expires_at = Status.RUNNING, owner[row.id], expires
            row.attempt += 1
            row.update_time = row.pulled_at = now
            row.pulled_rank, row.pulled_total = ranks[owner[row.id]]
    return [sorted((row for row in share if row.id not in dropped), key=lambda m: m.id) for share in shares]


# --- lease recovery ----------------------------------------------------------------------

_recovery_lock = threading.Lock()
_last_recovery: dict[tuple[str, str], float] = {}


def _recovery_due(topic: str, group: str) -> bool:
    return time.monotonic() - _last_recovery.get((topic, group), 0.0) >= RECOVERY_INTERVAL_SECONDS


def _recover_group_leases(topic: str, group: str) -> None:
    """Recover this group's expired leases at most once a second per process, so expired
    leases come back without any operator or maintenance worker."""
    now = time.monotonic()
    with _recovery_lock:
        if now - _last_recovery.get((topic, group), 0.0) < RECOVERY_INTERVAL_SECONDS:
            return
        _last_recovery[(topic, group)] = now
    leases_recover(topic=topic, group=group)


@retry_on_lock_conflict
def leases_recover(*, topic: str | None = None, group: str | None = None, limit: int = 500) -> int:
    """Take back messages whose lease expired: NEW again after the retry policy's delay if
    retries remain (one is spent), else TIMEOUT (a dead letter). Bounded and idempotent;
    SKIP LOCKED lets several sweepers run at once. Returns how many were recovered."""
    now = timezone.now()
    candidates = Message.objects.filter(status=Status.RUNNING, lease_expires_at__lt=now)
    if topic is not None:
        candidates = candidates.filter(topic=topic, group_name=group)
    # Find candidates with a plain read, then lock them by primary key: a locking scan of the
    # (status, id) index would take locks on the very entries concurrent acks are changing
    # (MariaDB waits on the row behind a secondary entry even under SKIP LOCKED).
    ids = list(candidates.order_by("id").values_list("id", flat=True)[:limit])
    if not ids:
        return 0
    with transaction.atomic():
        # Only what recovery reads (`data` may be 256 KiB a row), re-checked under the lock.
        expired = list(
            Message.objects.select_for_update(skip_locked=True)
            .filter(id__in=ids, status=Status.RUNNING, lease_expires_at__lt=now)
            .only("id", "topic", "group_name", "status", "retry_remaining", "attempt", "lease_owner")
            .order_by("id")
        )
        if not expired:
            return 0
        topics = {t.name: t for t in Topic.objects.filter(name__in={m.topic for m in expired})}
        traces = []
        retry_at: dict[datetime, list[int]] = defaultdict(list)
        timed_out: list[int] = []
        for message in expired:
            topic_row = topics.get(message.topic)
            if message.retry_remaining > 0 and topic_row is not None:
                message.status = Status.NEW
                message.retry_remaining -= 1
                message.effect_time = now + timedelta(seconds=retry_delay_seconds(topic_row, message.attempt))
                retry_at[message.effect_time].append(message.id)
                log = f"lease of {message.lease_owner} expired; retry at {message.effect_time.isoformat()}"
            else:
                message.status = Status.TIMEOUT
                timed_out.append(message.id)
                log = f"lease of {message.lease_owner} expired; no retries left"
            traces.append(trace_row(message, TraceEvent.LEASE_EXPIRED, at=now, actor="broker", log=log))
        # One UPDATE per distinct retry time (one in all for fixed delays), not a CASE per row.
        for effect_time, ids in retry_at.items():
            Message.objects.filter(id__in=ids).update(
                status=Status.NEW, retry_remaining=F("retry_remaining") - 1, effect_time=effect_time,
                lease_expires_at=None, update_time=now,
            )
        if timed_out:
            Message.objects.filter(id__in=timed_out).update(
                status=Status.TIMEOUT, lease_expires_at=None, update_time=now
            )
        trace_write(traces)
        pairs = {(m.topic, m.group_name) for m in expired if m.status == Status.NEW}
        transaction.on_commit(lambda: wakeup_hub().publish(pairs))
    metrics.leases_expired.inc(len(expired))
    return len(expired)
