"""The long-poll's wait, on the broker's event loop.

A pull (`POST /api/v1/pull`) is first dispatched to Django like any request: authentication,
rate limit, validation, the acks it carries and one claim, through Django's middleware. This
layer hands the view a `LongPollState` in the request's ASGI scope (the WSGI
`environ["asgi.scope"]`, which no client can set), holding the wait left. When the claim finds
nothing and the pull may still wait, the view parks it there (how long to wait, and how to
claim again) and answers an empty `204`, which never reaches the client. The pull then waits
here, as a coroutine holding no thread and no database connection, for a wake hint
(`registry.wakeups`) or the park's timeout (the fallback poll, or the group's next delayed
message coming due), and claims again on a thread (the same `messages_pull` service the view
calls). Its answer carries the headers Django gave the parked response of this very request
(security headers, HSTS under MQ_TLS, Vary...), so it cannot drift from Django's.

The waiter is registered before the first dispatch, so a produce that commits between a
claim and the wait still wakes it. While it waits, a parked pull is also open to a hand-off
(`mqcenter.handoffs`): a produce of this process may store a message leased to it, which it
then answers without claiming.

Measured with `python -m bench latency`: a woken pull claiming here delivers in ~40% of the
time of one dispatched through Django again (the thread's hops, middleware, DRF, ~3 ms at idle).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, NamedTuple

from django.conf import settings
from django.db import close_old_connections

from mqcenter.core import metrics
from mqcenter.core.auth import bearer_token, token_cache
from mqcenter.core.errors import (
    INTERNAL_ERROR,
    Unauthenticated,
    error_body,
    mq_error_from,
    retry_after,
)
from mqcenter.handoffs import offers
from mqcenter.pull_batches import KeyedBatches
from mqcenter.wsgi_bridge import READ_AHEAD_BYTES, content_length, read_body
from registry.wakeups import LoopEvent, wakeup_hub

logger = logging.getLogger(__name__)

ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]
PULL_PATH = "/api/v1/pull"
SCOPE_KEY = "mq.longpoll"
_DROPPED = {b"content-length", b"content-type"}
_NO_OFFER = contextlib.nullcontext(None)


class ParkedPull(NamedTuple):
    """A parked pull's next attempts: `attempt(remaining)` claims again and answers (the
    messages, the next park's seconds or None), `answer(messages)` renders them.

    With `key` (its topic and group), pulls of one key woken together may be claimed for
    together: `claim_many([spec, ...], [remaining, ...])` answers each one's (messages, park
    seconds) as its `attempt` would, or None for one that must claim alone."""

    attempt: Callable[[float], tuple[list[Any], float | None]]
    answer: Callable[[list[Any]], bytes]
    key: tuple[str, str] | None = None
    spec: Any = None
    claim_many: Callable[[list[Any], list[float]], list[tuple[list[Any], float | None] | None]] | None = None


@dataclass
class LongPollState:
    remaining: float  # seconds the pull may still wait
    park: tuple[float, ParkedPull] | None = None  # set by the view: wait this long, then this


# Pulls of this process waiting between attempts (read by its registry heartbeat).
_parked = 0


def parked_pulls() -> int:
    return _parked


# Threads (and so database connections) per process for the attempts of woken pulls.
CLAIM_THREADS = 8
_claims: ThreadPoolExecutor | None = None
# Woken pulls of one (topic, group) claimed for in one transaction at most.
CLAIM_BATCH = 250
# How long past its own wait a pull handed rows waits for the produce's commit: a produce
# is one short transaction, and a client gives up a while after the wait it asked for.
HANDOFF_GRACE = 1.0


class LongPoll:
    """ASGI middleware: pulls wait here between attempts; every other request goes to `app`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != PULL_PATH:
            await self.app(scope, receive, send)
            return
        body = await _read_body(scope, receive)
        if body is None:  # too large to hold, or the client went away: Django answers as usual
            await self.app(scope, receive, send)
            return
        started = time.monotonic()
        topic, group, wait = _wanted(body)
        deadline = started + wait
        wake = LoopEvent(asyncio.get_running_loop())
        with wakeup_hub().waiter(topic, group, wake):
            park = await self._dispatch(scope, body, wait, receive, send)
            if park is not None:
                wait, pull, headers = park
                seconds: float | None = wait
                global _parked
                _parked += 1  # on the event loop's thread only
                try:
                    while seconds is not None:
                        status, answer, seconds, extra = await _wait_then_attempt(pull, wake, seconds, deadline)
                finally:
                    _parked -= 1
                await _respond(send, status, answer, headers + extra)
        metrics.pull_wait.observe(time.monotonic() - started)

    async def _dispatch(
        self, scope: dict[str, Any], body: bytes, remaining: float, receive: Any, send: Any
    ) -> tuple[float, ParkedPull, list[tuple[bytes, bytes]]] | None:
        """The first attempt, through Django. Returns the park (its seconds, the pull and
        Django's headers), or None once Django answered."""
        state = LongPollState(remaining)
        headers: list[tuple[bytes, bytes]] = []
        body_sent = False

        async def replay() -> dict[str, Any]:
            nonlocal body_sent
            if not body_sent:
                body_sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        async def answer(message: dict[str, Any]) -> None:
            if state.park is None:
                await send(message)
            elif message["type"] == "http.response.start":
                headers.extend((k.lower(), v) for k, v in message.get("headers", []) if k.lower() not in _DROPPED)

        await self.app({**scope, SCOPE_KEY: state}, replay, answer)
        return (*state.park, headers) if state.park is not None else None


Attempt = tuple[int, bytes, float | None, list[tuple[bytes, bytes]]]


async def _wait_then_attempt(pull: ParkedPull, wake: LoopEvent, seconds: float, deadline: float) -> Attempt:
    """Wait for a wake hint or the park's timeout, open meanwhile to a hand-off from a
    produce of this process (`mqcenter.handoffs`); then send the answer the produce rendered
    of the rows it handed over, or attempt again. A taken pull keeps its wake flag set until
    the hand-off is settled, so the hints that come meanwhile wake other waiters."""
    offer = None
    handed = None
    try:
        with offers.opened(pull.key, pull.spec, pull.answer, wake) if pull.key is not None else _NO_OFFER as offer:
            await wake.wait(seconds)
        # Closed: no produce takes it from here on, so `taken` is final.
        if offer is not None and offer.taken:
            handed = await offer.settled(max(0.0, deadline - time.monotonic()) + HANDOFF_GRACE)
    finally:
        if offer is not None and offer.taken:
            offer.abandon()  # gave up or cancelled: the produce puts its rows back (nothing once settled)
    wake.clear()
    if handed is not None:
        return 200, handed, None, []
    return await _claim_again(pull, max(0.0, deadline - time.monotonic()))


def _executor() -> ThreadPoolExecutor:
    global _claims
    if _claims is None:
        _claims = ThreadPoolExecutor(CLAIM_THREADS, thread_name_prefix="mq-pull")
    return _claims


async def _claim_again(pull: ParkedPull, remaining: float) -> Attempt:
    """Another attempt, on a thread: (status, answer, None, extra headers), or a park's
    seconds in third place. Pulls of one (topic, group) woken while another of theirs
    claims are claimed for together (`_batches`)."""
    if pull.key is not None and pull.claim_many is not None:
        return await _batches.submit(pull.key, (pull, remaining))
    return await asyncio.get_running_loop().run_in_executor(_executor(), _attempt, pull, remaining)


async def _run_batch(items: list[tuple[ParkedPull, float]]) -> list[Attempt]:
    return await asyncio.get_running_loop().run_in_executor(_executor(), _attempt_many, items)


_batches: KeyedBatches[tuple[ParkedPull, float], Attempt] = KeyedBatches(_run_batch, CLAIM_BATCH)


def _attempt_many(items: list[tuple[ParkedPull, float]]) -> list[Attempt]:
    """The attempts of pulls of one key, claimed for together; alone, or should the joint
    claim fail, each its own attempt (which answers its own error)."""
    claim_many = items[0][0].claim_many
    if len(items) == 1 or claim_many is None:
        return [_attempt(pull, remaining) for pull, remaining in items]
    close_old_connections()
    try:
        claimed = claim_many([pull.spec for pull, _ in items], [remaining for _, remaining in items])
    except Exception:
        logger.exception("claiming for %d woken pulls together failed; each claims alone", len(items))
        return [_attempt(pull, remaining) for pull, remaining in items]
    finally:
        close_old_connections()
    attempts: list[Attempt] = []
    for (pull, remaining), answer in zip(items, claimed, strict=True):
        if answer is None:
            attempts.append(_attempt(pull, remaining))
        else:
            messages, park = answer
            attempts.append((0, b"", park, []) if park is not None else (200, pull.answer(messages), None, []))
    return attempts


def _attempt(pull: ParkedPull, remaining: float) -> Attempt:
    close_old_connections()  # as Django does around a request
    try:
        messages, park = pull.attempt(remaining)
        if park is not None:
            return 0, b"", park, []
        return 200, pull.answer(messages), None, []
    except Exception as exc:
        err = mq_error_from(exc)
        if err is None:
            logger.exception("unhandled error in a pull")
            return 500, json.dumps(error_body(*INTERNAL_ERROR)).encode(), None, []
        header = retry_after(err)
        return err.status, json.dumps(err.body()).encode(), None, [] if header is None else [(b"retry-after", header.encode())]
    finally:
        close_old_connections()


async def _respond(send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [
        *headers, (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def _read_body(scope: dict[str, Any], receive: Any) -> bytes | None:
    """The pull's body, read here before Django sees the request; None leaves it to Django,
    which then answers after one attempt without waiting. Beyond READ_AHEAD_BYTES (a pull
    carrying many acks with logs) it is read only for a token this process knows: a client
    without one cannot make the broker hold more than the bridge reads ahead for any request."""
    length = content_length(scope)
    if length is None or length > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
        return None
    if length > READ_AHEAD_BYTES and not _known_token(scope):
        return None
    return await read_body(receive)


def _known_token(scope: dict[str, Any]) -> bool:
    """Whether the request's token is in this process's token cache. A pull carries acks only
    for messages it pulled before, so its token is there unless it expired meanwhile (then
    the pull answers without waiting, and the next one waits). Read on the event loop: no
    thread and no query for a client whose token is unknown. The header is joined as the WSGI
    environ joins repeated ones, so Django judges the same value."""
    header = b",".join(value for name, value in scope["headers"] if name.lower() == b"authorization")
    try:
        return token_cache.get(bearer_token(header)) is not None
    except Unauthenticated:
        return False


def _wanted(body: bytes) -> tuple[str, str, float]:
    """The (topic, group) to wait on and the wait asked for, read without validating: Django
    validates, and answers an invalid pull at its first dispatch."""
    try:
        request = json.loads(body)
        topic, group, wait = request["topic"], request.get("group", "default"), float(request.get("wait_seconds", 0))
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return "", "", 0.0
    if not isinstance(topic, str) or not isinstance(group, str) or not wait > 0:
        return "", "", 0.0
    return topic, group, min(wait, float(settings.MQ_MAX_WAIT_SECONDS))
