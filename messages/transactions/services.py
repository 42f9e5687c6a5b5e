"""Transactional (half) messages, as RocketMQ does them.

A transactional produce stores its batch as PREPARED: claims only take NEW rows, so the
messages exist durably but no consumer sees them. The producer then commits (they become
NEW and pulls are woken) or rolls back (they are deleted). A producer that dies in between
leaves the transaction open; the check-back task asks the producer's `check_url` what
happened and resolves it, and gives up after MQ_TRANSACTION_GIVE_UP_SECONDS: it rolls back,
or commits when each topic of the transaction says so (`Topic.check_give_up`).

The check-back is the broker calling out, through mqcenter/core/outbound.py: only http(s),
only to hosts MQ_TRANSACTION_CHECK_HOSTS allows the transaction's business line, each call
within one total deadline, and fairly: each run asks at most MQ_OUTBOUND_PER_BIZ
transactions of each line, all at once, so one line's slow or broken endpoints delay only
that line's transactions, and one failed call never loses the others' answers.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, Window
from django.db.models.functions import Greatest, RowNumber
from django.utils import timezone

from messages.delivery.produce import ProduceItem, ProduceResult, messages_produce
from messages.delivery.trace import trace_row, trace_write
from messages.models import Message, MessageTrace, Status, TraceEvent
from messages.stats.live import live_moved
from messages.transactions.copies import commit_settle
from messages.transactions.models import Transaction
from mqcenter.core.auth import Principal
from mqcenter.core.errors import Conflict, InvalidRequest, NotFound
from mqcenter.core.outbound import Answer, Call, allow_list, post_many, url_check
from registry.wakeups import wakeup_hub
from topics.models import Biz, CheckGiveUp, Topic

logger = logging.getLogger(__name__)

MAX_CHECK_AFTER_SECONDS = 7 * 86400
CHECK_BATCH = 100  # open transactions asked about per task run
CHECK_ACTOR = "check-back"
USER_AGENT = "mqcenter-check-back"
LOG_LIMIT = 50  # entries kept in a transaction's own log

# What a check endpoint answers -> what the broker does.
CHECK_STATES = ("commit", "rollback", "unknown")


@dataclass(frozen=True)
class PreparedBatch:
    transaction: Transaction
    results: list[ProduceResult]


def check_url_validate(*, url: Any, biz: str | None, field: str = "transaction.check_url") -> str:
    """The URL if the broker may call it for business line `biz`: http(s), printable ASCII
    without spaces or control characters, a host and port MQ_TRANSACTION_CHECK_HOSTS allows
    that line."""
    allowed = allow_list("MQ_TRANSACTION_CHECK_HOSTS")
    if not allowed.entries:
        raise InvalidRequest(
            "Transactional messages are off: the operator has listed no check hosts (MQ_TRANSACTION_CHECK_HOSTS).",
            details={"field": field},
        )
    return url_check(url=url, allowed=allowed, biz=biz, field=field, what="check_url").url


def _biz_names(ids: set[int | None]) -> dict[int | None, str | None]:
    known = {i for i in ids if i is not None}
    names: dict[int | None, str | None] = dict(Biz.objects.filter(id__in=known).values_list("id", "name"))
    return {i: names.get(i) for i in ids}


def transaction_prepare(
    *, principal: Principal, items: list[ProduceItem], check_url: Any, check_after_seconds: Any
) -> PreparedBatch:
    """Store `items` as PREPARED under a new open transaction, all or nothing.

    Runs the ordinary produce inside one database transaction and turns its fresh rows
    PREPARED before the commit, so no claim ever sees them NEW (uncommitted rows are
    invisible to other connections). A produce inside a caller's transaction hands nothing
    off to waiting pulls. A dedup key repeating a stored message answers that message as
    a duplicate and does not join the transaction. `check_url` and `check_after_seconds`
    arrive as the request gave them and are validated here (400 naming the field).
    """
    check_url = check_url_validate(url=check_url, biz=_biz_names({principal.home_biz_id})[principal.home_biz_id])
    if isinstance(check_after_seconds, bool) or not isinstance(check_after_seconds, int) or not (
        1 <= check_after_seconds <= MAX_CHECK_AFTER_SECONDS
    ):
        raise InvalidRequest(
            f"check_after_seconds must be an integer between 1 and {MAX_CHECK_AFTER_SECONDS}.",
            details={"field": "transaction.check_after_seconds"},
        )
    now = timezone.now()
    with transaction.atomic():
        results = messages_produce(principal=principal, items=items)
        fresh = [r.id for r in results if not r.duplicate]
        Message.objects.filter(id__in=fresh, status=Status.NEW).update(status=Status.PREPARED)
        live_moved((r.topic, r.group, Status.NEW, Status.PREPARED) for r in results if not r.duplicate)
        txn = Transaction.objects.create(
            biz_id=principal.home_biz_id, producer=principal.name[:200],
            topics=sorted({r.topic for r in results}), message_ids=sorted(set(fresh)),
            check_url=check_url, check_after_seconds=check_after_seconds,
            next_check_at=now + timedelta(seconds=check_after_seconds), created_at=now,
            log=[_entry(now, principal.name, "prepared", f"{len(set(fresh))} messages")],
        )
        repeated = [r.id for r in results if r.duplicate and r.status == Status.PREPARED]
        if repeated:
            _adopt(txn, repeated, now)
    prepared = set(txn.message_ids)
    for result in results:
        if result.id in prepared:
            result.status = Status.PREPARED
    return PreparedBatch(txn, results)


def _adopt(txn: Transaction, ids: list[int], now: datetime) -> None:
    """Move PREPARED messages that `txn` repeats (same dedup keys) from the producer's older
    open transactions into `txn`. A prepare whose answer was lost and was retried must not
    leave the messages in a transaction the producer never learnt the id of: the check-back
    would ask about an id the app never recorded and, at last, roll them back."""
    wanted = set(ids)
    matches = Q()
    for message_id in wanted:
        matches |= Q(message_ids__contains=[message_id])
    older = Transaction.objects.select_for_update().filter(
        matches, state=Transaction.State.OPEN, producer=txn.producer
    ).exclude(id=txn.id)
    for old in older:
        moved = sorted(set(old.message_ids) & wanted)
        old.message_ids = sorted(set(old.message_ids) - wanted)
        old.log = [*old.log, _entry(now, txn.producer, "superseded", f"{len(moved)} messages moved to {txn.id}")]
        if not old.message_ids:
            # Nothing left to commit or delete: closed as rolled back, with no message touched.
            old.state, old.finished_at = Transaction.State.ROLLED_BACK, now
        old.save(update_fields=["message_ids", "log", "state", "finished_at"])
        txn.message_ids = sorted(set(txn.message_ids) | set(moved))
    txn.save(update_fields=["message_ids"])


def transaction_get(*, principal: Principal, transaction_id: str, for_update: bool = False) -> Transaction:
    """The transaction if `principal` may produce to every topic of it: 404 outside its
    business line, 403 within it without the produce scope."""
    rows = Transaction.objects.select_for_update() if for_update else Transaction.objects
    txn = rows.filter(id=transaction_id).first()
    if txn is None or not principal.may_biz(txn.biz_id):
        raise NotFound(f"Transaction {transaction_id} does not exist.", details={"transaction_id": transaction_id})
    for topic in txn.topics:
        principal.require("produce", topic)
    return txn


def transaction_commit(*, principal: Principal, transaction_id: str) -> Transaction:
    """Make the transaction's messages deliverable. Committing twice is harmless; a rolled
    back transaction answers 409."""
    with transaction.atomic():
        txn = transaction_get(principal=principal, transaction_id=transaction_id, for_update=True)
        _resolve(txn, commit=True, actor=principal.name, reason="committed by the producer")
    return txn


def transaction_rollback(*, principal: Principal, transaction_id: str) -> Transaction:
    """Delete the transaction's messages. Rolling back twice is harmless; a committed
    transaction answers 409."""
    with transaction.atomic():
        txn = transaction_get(principal=principal, transaction_id=transaction_id, for_update=True)
        _resolve(txn, commit=False, actor=principal.name, reason="rolled back by the producer")
    return txn


def _resolve(txn: Transaction, *, commit: bool, actor: str, reason: str) -> None:
    """Commit or roll back `txn`. Call inside a transaction holding its row lock."""
    wanted = Transaction.State.COMMITTED if commit else Transaction.State.ROLLED_BACK
    if txn.state == wanted:
        return
    if txn.state != Transaction.State.OPEN:
        raise Conflict(
            f"Transaction {txn.id} is already {txn.state.replace('_', ' ')}.",
            details={"transaction_id": txn.id, "state": txn.state},
        )
    now = timezone.now()
    prepared = Message.objects.filter(id__in=txn.message_ids, status=Status.PREPARED)
    if commit:
        locked = list(prepared.select_for_update().order_by("id"))
        # Copied to the groups subscribed now: the publish is produced when it commits.
        messages, added = commit_settle(locked, now)
        # A delay counts from the produce; a message whose delay passed while prepared is due now.
        Message.objects.filter(id__in=[m.id for m in messages]).update(
            status=Status.NEW, effect_time=Greatest(F("effect_time"), now), update_time=now)
        gone = {m.id for m in locked} - {m.id for m in messages}
        live_moved([*((m.topic, m.group_name, Status.PREPARED, None) for m in locked if m.id in gone),
                    *((m.topic, m.group_name, Status.PREPARED, Status.NEW) for m in messages)])
        copies = list(Message.objects.filter(id__in=added))
        live_moved((m.topic, m.group_name, None, Status.NEW) for m in copies)
        messages += copies
        for message in messages:
            message.status = Status.NEW
        trace_write(trace_row(m, TraceEvent.COMMITTED, at=now, actor=actor, log=f"transaction {txn.id}")
                    for m in messages)
        txn.message_ids = sorted((set(txn.message_ids) - gone) | set(added))
        pairs = {(m.topic, m.group_name) for m in messages}
        transaction.on_commit(lambda: wakeup_hub().publish(pairs))
    else:
        ids = list(prepared.select_for_update().values_list("id", flat=True))
        MessageTrace.objects.filter(message_id__in=ids).delete()
        Message.objects.filter(id__in=ids).delete()
    txn.state, txn.finished_at = wanted, now
    txn.log = [*txn.log, _entry(now, actor, wanted, reason)][-LOG_LIMIT:]
    txn.save(update_fields=["state", "finished_at", "log", "message_ids"])


def _entry(at: datetime, actor: str, event: str, log: str = "") -> dict[str, str]:
    return {"at": at.isoformat(), "actor": actor[:200], "event": event, "log": log[:500]}


# --- the check-back ------------------------------------------------------------------------


def transactions_check(*, now: datetime | None = None) -> dict[str, Any]:
    """Resolve open transactions: give up on those older than MQ_TRANSACTION_GIVE_UP_SECONDS
    (roll back, or commit as their topics say: `give_up_commits`),
    and ask `check_url` about those past `next_check_at`.

    Fair across business lines: a run takes each line's earliest due transactions, at most
    MQ_OUTBOUND_PER_BIZ of a line (and MQ_TRANSACTION_CHECK_CONCURRENCY in all), and asks
    them all at once, so a run lasts one call's deadline at most. Safe on several workers at
    once: each transaction is taken by a conditional UPDATE of its `next_check_at` (another
    worker may have taken it first: then the row count is 0), and resolutions lock the row
    and accept only an open transaction. The calls run outside any database transaction.
    """
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.MQ_TRANSACTION_GIVE_UP_SECONDS)
    given_up = {"committed": 0, "rolled_back": 0}
    for txn_id, topics in Transaction.objects.filter(state=Transaction.State.OPEN, created_at__lte=cutoff).values_list(
        "id", "topics"
    )[:CHECK_BATCH]:
        commit = give_up_commits(topics)
        done = _resolve_by_id(txn_id, commit=commit, reason=(
            "gave up: no answer within MQ_TRANSACTION_GIVE_UP_SECONDS; "
            + ("committed: every topic's check_give_up is commit" if commit else "rolled back (check_give_up)")))
        given_up["committed" if commit else "rolled_back"] += done
    taken = _due_taken(now)
    if not taken:
        return {"checked": 0, **given_up, "unknown": 0}
    answers = post_many(
        [Call(url, {"transaction_id": txn_id}, biz=biz) for txn_id, url, biz in taken],
        allowed=allow_list("MQ_TRANSACTION_CHECK_HOSTS"),
        deadline=settings.MQ_TRANSACTION_CHECK_TIMEOUT_SECONDS,
        user_agent=USER_AGENT,
        per_group=settings.MQ_OUTBOUND_PER_BIZ,
        overall=settings.MQ_TRANSACTION_CHECK_CONCURRENCY,
    )
    counts = {"checked": len(taken), **given_up, "unknown": 0}
    for (txn_id, _url, _biz), answer in zip(taken, answers, strict=True):
        state, error = check_answer_state(answer)
        if state == "commit":
            counts["committed"] += _resolve_by_id(txn_id, commit=True, reason="check-back answered commit")
        elif state == "rollback":
            counts["rolled_back"] += _resolve_by_id(txn_id, commit=False, reason="check-back answered rollback")
        else:
            counts["unknown"] += 1
            _note(txn_id, error or "check-back answered unknown")
    return counts


def give_up_commits(topics: list[str]) -> bool:
    """Whether a transaction over `topics` nobody resolved is committed when the check-back
    gives up: only if each of its topics says so (`Topic.check_give_up`); rolled back otherwise,
    also when a topic is gone."""
    wanted = set(topics)
    settings_of = dict(Topic.all_objects.filter(name__in=wanted).values_list("name", "check_give_up"))
    return bool(wanted) and all(settings_of.get(name) == CheckGiveUp.COMMIT for name in wanted)


def _due_taken(now: datetime) -> list[tuple[str, str, str | None]]:
    """(id, check_url, business line name) of the due transactions this run takes: each
    line's earliest, at most MQ_OUTBOUND_PER_BIZ a line, lines taking turns."""
    due = list(
        Transaction.objects.filter(state=Transaction.State.OPEN, next_check_at__lte=now)
        .annotate(line_rank=Window(RowNumber(), partition_by=[F("biz_id")], order_by=[F("next_check_at"), F("id")]))
        .filter(line_rank__lte=max(1, settings.MQ_OUTBOUND_PER_BIZ))
        .order_by("line_rank", "next_check_at", "id")
        .values_list("id", "next_check_at", "check_url", "biz_id")[: max(1, settings.MQ_TRANSACTION_CHECK_CONCURRENCY)]
    )
    names = _biz_names({biz_id for *_, biz_id in due})
    taken = []
    for txn_id, next_check_at, url, biz_id in due:
        won = Transaction.objects.filter(
            id=txn_id, state=Transaction.State.OPEN, next_check_at=next_check_at
        ).update(next_check_at=now + timedelta(seconds=settings.MQ_TRANSACTION_RECHECK_SECONDS), attempts=F("attempts") + 1)
        if won:
            taken.append((txn_id, url, names[biz_id]))
    return taken


def check_answer_state(answer: Answer) -> tuple[str | None, str]:
    """What a check endpoint's answer says: ("commit" | "rollback" | "unknown", "") or, for a
    failed call or an answer without a known state, (None, why): ask again later."""
    if not answer.ok:
        return None, f"check-back failed: {answer.error}"[:500]
    try:
        body = answer.json()
    except ValueError:
        return None, "check-back failed: the answer is not JSON"
    state = body.get("state") if isinstance(body, dict) else None
    if state not in CHECK_STATES:
        return None, f"check-back failed: the answer has no state of {', '.join(CHECK_STATES)}"
    return str(state), ""


def transaction_abandon(*, transaction_id: str, reason: str) -> int:
    """Roll back an open transaction without its producer (a topic of it was deleted).
    Returns 1, or 0 if it was resolved meanwhile. Takes its own transaction."""
    return _resolve_by_id(transaction_id, commit=False, reason=reason)


def _resolve_by_id(txn_id: str, *, commit: bool, reason: str) -> int:
    with transaction.atomic():
        txn = Transaction.objects.select_for_update().filter(id=txn_id, state=Transaction.State.OPEN).first()
        if txn is None:  # resolved meanwhile by its producer or another worker
            return 0
        _resolve(txn, commit=commit, actor=CHECK_ACTOR, reason=reason)
    return 1


def _note(txn_id: str, error: str) -> None:
    with transaction.atomic():
        txn = Transaction.objects.select_for_update().filter(id=txn_id, state=Transaction.State.OPEN).first()
        if txn is not None:
            txn.last_error = error
            txn.log = [*txn.log, _entry(timezone.now(), CHECK_ACTOR, "unknown", error)][-LOG_LIMIT:]
            txn.save(update_fields=["last_error", "log"])


def transactions_open(*, principal: Principal, limit: int = 200) -> list[Transaction]:
    """Open transactions the principal may see, oldest first (console)."""
    rows = Transaction.objects.filter(state=Transaction.State.OPEN).order_by("created_at")
    if principal.biz_ids is not None:
        rows = rows.filter(Q(biz_id__in=principal.biz_ids))
    return list(rows[:limit])
