"""Transactional (half) messages, as RocketMQ does them.

A transactional produce stores its batch as PREPARED: claims only take NEW rows, so the
messages exist durably but no consumer sees them. The producer then commits (they become
NEW and pulls are woken) or rolls back (they are deleted). A producer that dies in between
leaves the transaction open; the check-back task asks the producer's `check_url` what
happened and resolves it, and gives up (rolls back) after MQ_TRANSACTION_GIVE_UP_SECONDS.

The check-back is the broker calling out: only http(s), only to hosts the operator listed
in MQ_TRANSACTION_CHECK_HOSTS, with a timeout, no redirects, and a bounded number at once.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Greatest
from django.utils import timezone

from messages.delivery.produce import ProduceItem, ProduceResult, messages_produce
from messages.delivery.trace import trace_row, trace_write
from messages.models import Message, MessageTrace, Status, TraceEvent
from messages.stats.live import live_moved
from messages.transactions.models import Transaction
from mqcenter.core.auth import Principal
from mqcenter.core.errors import Conflict, InvalidRequest, MQError, NotFound
from mqcenter.core.outbound import OPENER, host_allowed
from registry.wakeups import wakeup_hub

logger = logging.getLogger(__name__)

MAX_CHECK_AFTER_SECONDS = 7 * 86400
CHECK_BATCH = 100  # open transactions asked about per task run
CHECK_ACTOR = "check-back"
LOG_LIMIT = 50  # entries kept in a transaction's own log

# What a check endpoint answers -> what the broker does.
CHECK_STATES = ("commit", "rollback", "unknown")


@dataclass(frozen=True)
class PreparedBatch:
    transaction: Transaction
    results: list[ProduceResult]


def check_url_validate(*, url: Any, field: str = "transaction.check_url") -> str:
    """The URL if the broker may call it: http(s), with a host the operator listed."""
    if not isinstance(url, str) or not url or len(url) > 2000:
        raise InvalidRequest("check_url must be a URL of at most 2000 characters.", details={"field": field})
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidRequest("check_url must be an http or https URL.", details={"field": field})
    if not settings.MQ_TRANSACTION_CHECK_HOSTS:
        raise InvalidRequest(
            "Transactional messages are off: the operator has listed no check hosts (MQ_TRANSACTION_CHECK_HOSTS).",
            details={"field": field},
        )
    if not _host_allowed(parts.hostname, parts.port):
        raise InvalidRequest(
            f"check_url's host {parts.hostname!r} is not in MQ_TRANSACTION_CHECK_HOSTS.", details={"field": field}
        )
    return url


def _host_allowed(host: str, port: int | None) -> bool:
    return host_allowed(host, port, settings.MQ_TRANSACTION_CHECK_HOSTS)


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
    check_url = check_url_validate(url=check_url)
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
        messages = list(prepared.select_for_update().order_by("id"))
        # A delay counts from the produce; a message whose delay passed while prepared is due now.
        prepared.update(status=Status.NEW, effect_time=Greatest(F("effect_time"), now), update_time=now)
        for message in messages:
            message.status = Status.NEW
        live_moved((m.topic, m.group_name, Status.PREPARED, Status.NEW) for m in messages)
        trace_write(trace_row(m, TraceEvent.COMMITTED, at=now, actor=actor, log=f"transaction {txn.id}")
                    for m in messages)
        pairs = {(m.topic, m.group_name) for m in messages}
        transaction.on_commit(lambda: wakeup_hub().publish(pairs))
    else:
        ids = list(prepared.select_for_update().values_list("id", flat=True))
        MessageTrace.objects.filter(message_id__in=ids).delete()
        Message.objects.filter(id__in=ids).delete()
    txn.state, txn.finished_at = wanted, now
    txn.log = [*txn.log, _entry(now, actor, wanted, reason)][-LOG_LIMIT:]
    txn.save(update_fields=["state", "finished_at", "log"])


def _entry(at: datetime, actor: str, event: str, log: str = "") -> dict[str, str]:
    return {"at": at.isoformat(), "actor": actor[:200], "event": event, "log": log[:500]}


# --- the check-back ------------------------------------------------------------------------


def transactions_check(
    *, now: datetime | None = None, call: Callable[[str, str], str] | None = None
) -> dict[str, Any]:
    """Resolve open transactions: roll back those older than MQ_TRANSACTION_GIVE_UP_SECONDS,
    and ask `check_url` about those past `next_check_at`.

    Safe on several workers at once: each transaction is taken by a conditional UPDATE of
    its `next_check_at` (another worker may have taken it first: then the row count is 0),
    and resolutions lock the row and accept only an open transaction. The HTTP calls run
    outside any database transaction, at most MQ_TRANSACTION_CHECK_CONCURRENCY at once.
    """
    now = now or timezone.now()
    call = call or check_back_call
    gave_up = 0
    cutoff = now - timedelta(seconds=settings.MQ_TRANSACTION_GIVE_UP_SECONDS)
    for txn_id in Transaction.objects.filter(state=Transaction.State.OPEN, created_at__lte=cutoff).values_list(
        "id", flat=True
    )[:CHECK_BATCH]:
        gave_up += _resolve_by_id(txn_id, commit=False, reason="gave up: no answer within MQ_TRANSACTION_GIVE_UP_SECONDS")
    due = list(
        Transaction.objects.filter(state=Transaction.State.OPEN, next_check_at__lte=now)
        .order_by("next_check_at")
        .values_list("id", "next_check_at", "check_url")[:CHECK_BATCH]
    )
    taken = []
    for txn_id, next_check_at, url in due:
        won = Transaction.objects.filter(
            id=txn_id, state=Transaction.State.OPEN, next_check_at=next_check_at
        ).update(next_check_at=now + timedelta(seconds=settings.MQ_TRANSACTION_RECHECK_SECONDS), attempts=F("attempts") + 1)
        if won:
            taken.append((txn_id, url))
    if not taken:
        return {"checked": 0, "committed": 0, "rolled_back": gave_up, "unknown": 0}
    with ThreadPoolExecutor(max_workers=max(1, settings.MQ_TRANSACTION_CHECK_CONCURRENCY)) as pool:
        answers = list(pool.map(lambda pair: _ask(call, *pair), taken))
    counts = {"checked": len(taken), "committed": 0, "rolled_back": gave_up, "unknown": 0}
    for (txn_id, _url), (state, error) in zip(taken, answers, strict=True):
        if state == "commit":
            counts["committed"] += _resolve_by_id(txn_id, commit=True, reason="check-back answered commit")
        elif state == "rollback":
            counts["rolled_back"] += _resolve_by_id(txn_id, commit=False, reason="check-back answered rollback")
        else:
            counts["unknown"] += 1
            _note(txn_id, error or "check-back answered unknown")
    return counts


def _ask(call: Callable[[str, str], str], txn_id: str, url: str) -> tuple[str | None, str]:
    try:
        # Checked again at call time: the operator may have removed the host since.
        check_url_validate(url=url)
        return call(url, txn_id), ""
    except (OSError, ValueError, MQError) as exc:  # "ask again later", recorded on the row
        return None, f"check-back failed: {exc}"[:500]


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


def check_back_call(url: str, transaction_id: str) -> str:
    """POST {"transaction_id"} to `url`; the answer's state ("commit", "rollback" or
    "unknown"). Raises on a timeout, a non-2xx answer or an answer without a known state."""
    # The scheme is http(s): check_url_validate ran just before, at call time.
    request = urllib.request.Request(  # noqa: S310
        url, data=json.dumps({"transaction_id": transaction_id}).encode(), method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "mqcenter-check-back"},
    )
    with OPENER.open(request, timeout=settings.MQ_TRANSACTION_CHECK_TIMEOUT_SECONDS) as response:
        body = response.read(64 * 1024)
    answer = json.loads(body)
    state = answer.get("state") if isinstance(answer, dict) else None
    if state not in CHECK_STATES:
        raise ValueError(f"answer has no state of {', '.join(CHECK_STATES)}")
    return str(state)


def transactions_open(*, principal: Principal, limit: int = 200) -> list[Transaction]:
    """Open transactions the principal may see, oldest first (console)."""
    rows = Transaction.objects.filter(state=Transaction.State.OPEN).order_by("created_at")
    if principal.biz_ids is not None:
        rows = rows.filter(Q(biz_id__in=principal.biz_ids))
    return list(rows[:limit])
