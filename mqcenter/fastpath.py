"""The three hot endpoints, `POST /api/v1/messages` (produce), `/api/v1/pull` and
`/api/v1/ack`, served on the event loop.

Measured on 2 cores (bench/, session 5 notes): through Django's middleware chain, DRF's
dispatch and a2wsgi's thread hand-offs an empty pull cost ~3.9 ms of broker CPU, and a
thousand woken long-polls each needed a thread to wake, run Django's request cycle and hand
its answer back to the loop. Here the same validation, authentication, rate limit and
services run with none of that: the request is parsed and answered on the loop, its
database work runs on a small thread pool (which bounds the connections it opens), and a
waiting pull is a coroutine (`messages_pull_async`), not a sleeping thread.

Only a well-formed request takes this path: a JSON body with a Content-Length within the
limit, a Bearer token and an Accept that allows JSON. Anything else goes on to Django, where
`messages.api` answers it, so the uncommon cases (and their error bodies) have one home.
Every outcome here is rendered as the Django path renders it; `tests/api/test_fastpath.py`
holds the two side by side.
"""

from __future__ import annotations

import asyncio
import functools
import io
import logging
import os
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.conf import settings
from django.db import close_old_connections
from rest_framework.renderers import JSONRenderer

from messages import services, validation
from messages.serializers import pull_answer
from messages.transactions_api import produce_request
from mqcenter.core import metrics
from mqcenter.core.auth import Principal, principal_for_token, token_cache, token_throttle_wait
from mqcenter.core.errors import (
    INTERNAL_ERROR,
    MQError,
    error_body,
    mq_error_from,
    rate_limited,
    retry_after,
)
from mqcenter.core.parsers import StrictJSONParser

logger = logging.getLogger(__name__)

ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]

# Headers every answer carries, as Django's middleware would add them to an API response.
_HEADERS = [
    (b"content-type", b"application/json"),
    (b"vary", b"Accept"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
]
_JSON_TYPES = (b"application/json", b"*/*", b"application/*")


class FastPath:
    """ASGI middleware: answers produce, pull and ack itself, passes every other request to
    `app`."""

    def __init__(self, app: ASGIApp, threads: int | None = None) -> None:
        self.app = app
        self.threads = threads or int(os.environ.get("MQ_FAST_THREADS", "32"))
        self._executor: ThreadPoolExecutor | None = None
        # The request counter's child per (route, status): `labels()` costs ~3 us a call,
        # paid a thousand times over when a burst answers a thousand long-polls.
        self._counters: dict[tuple[str, int], Any] = {}
        self._routes: dict[str, Callable[[Principal, str, bytes], Awaitable[tuple[int, bytes]]]] = {
            "/api/v1/messages": self._produce,
            "/api/v1/pull": self._pull,
            "/api/v1/ack": self._ack,
        }

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        route = self._routes.get(scope["path"]) if scope["type"] == "http" and scope["method"] == "POST" else None
        token = _bearer_token(scope) if route is not None else None
        if route is None or token is None:
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive)
        if body is None:
            return  # the client went away
        try:
            # In DRF's order: authentication, then (in `_in_order`) the rate limit and the body.
            principal = token_cache.get(token) or await self.run(principal_for_token, token)
            status, answer = await route(principal, token, body)
        except Exception as exc:  # noqa: BLE001 - every failure becomes an API.md error body
            status = await self._error(send, exc, scope["path"])
        else:
            await _respond(send, status, answer)
        key = (scope["path"], status)
        counter = self._counters.get(key)
        if counter is None:
            counter = self._counters[key] = metrics.fast_path.labels(key[0].rsplit("/", 1)[-1], str(status))
        counter.inc()

    async def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a blocking call (one that may use the database) on the pool."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix="mq-fastpath")
        call = functools.partial(_with_connection, fn, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    # Produce and ack take one hop to the pool, for the rate limit, the body and the service
    # together: a hop for each cost a produce ~0.5 ms more than Django's one WSGI hop
    # (bench.request_cost, session 6).
    async def _produce(self, principal: Principal, token: str, body: bytes) -> tuple[int, bytes]:
        return await self.run(_in_order, token, body, functools.partial(_produce, principal))

    async def _pull(self, principal: Principal, token: str, body: bytes) -> tuple[int, bytes]:
        args, outcomes = await self.run(_in_order, token, body, functools.partial(_acked_pull_request, principal))
        messages = await services.messages_pull_async(principal=principal, run=self.run, **args)
        return 200, pull_answer(messages, outcomes)

    async def _ack(self, principal: Principal, token: str, body: bytes) -> tuple[int, bytes]:
        return await self.run(_in_order, token, body, functools.partial(_ack, principal))

    async def _error(self, send: Any, exc: Exception, path: str) -> int:
        err: MQError | None = mq_error_from(exc)
        if err is None:
            logger.error("unhandled error on %s", path, exc_info=exc)
            await _respond(send, 500, _json(error_body(*INTERNAL_ERROR)))
            return 500
        header = retry_after(err)
        extra = [(b"retry-after", header.encode())] if header is not None else []
        await _respond(send, err.status, _json(err.body()), extra)
        return err.status


def _in_order(token: str, body: bytes, then: Callable[[Any], Any]) -> Any:
    """What DRF does between authentication and the view, in its order: the rate limit, then
    the body; then `then(data)`."""
    wait = token_throttle_wait(token)
    if wait is not None:
        raise rate_limited(wait)
    return then(StrictJSONParser().parse(io.BytesIO(body)))


def _produce(principal: Principal, data: Any) -> tuple[int, bytes]:
    code, answer = produce_request(principal, data)  # plain or transactional
    return code, _json(answer)


def _acked_pull_request(principal: Principal, data: Any) -> tuple[dict[str, Any], list[dict[str, Any]] | None]:
    """The pull's arguments, once the acks it carries are applied (in the same hop)."""
    args = validation.pull_request(data)
    outcomes = services.acks_before_pull(
        principal=principal, topic=args["topic"], consumer=args["consumer"], results=args.pop("results")
    )
    return args, outcomes


def _ack(principal: Principal, data: Any) -> tuple[int, bytes]:
    consumer, results = validation.ack_request(data)
    outcomes = services.messages_ack(principal=principal, consumer=consumer, results=results)
    return 200, _json({"results": outcomes})


def _with_connection(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """What Django does around a request, around one call: a connection that broke (the
    database restarted) or outlived CONN_MAX_AGE is dropped before and after."""
    close_old_connections()
    try:
        return fn(*args, **kwargs)
    finally:
        close_old_connections()


def _bearer_token(scope: dict[str, Any]) -> str | None:
    """The token of a request this path may answer, or None to leave it to Django."""
    authorization = content_type = length = None
    accept = b"*/*"
    for name, value in scope["headers"]:
        if name == b"authorization":
            authorization = value
        elif name == b"content-type":
            content_type = value
        elif name == b"content-length":
            length = value
        elif name == b"accept":
            accept = value
    if authorization is None or content_type is None or length is None:
        return None
    if content_type.split(b";")[0].strip().lower() != b"application/json":
        return None
    if not any(kind in accept for kind in _JSON_TYPES):
        return None
    if not length.isdigit() or int(length) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
        return None
    parts = authorization.split()
    if len(parts) != 2 or parts[0].lower() != b"bearer" or not parts[1].isascii():
        return None
    return parts[1].decode("ascii")


async def _read_body(receive: Any) -> bytes | None:
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


_RENDERER = JSONRenderer()  # DRF's, so both paths write the same bytes


def _json(data: Any) -> bytes:
    return _RENDERER.render(data)


async def _respond(send: Any, status: int, body: bytes, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    headers = [*_HEADERS, (b"content-length", str(len(body)).encode()), *(extra or [])]
    # uvicorn writes the status line and headers as soon as it is given them, then the body:
    # two sends on the socket per answer. Held and sent together they are one, which on
    # loopback is one wake-up of the reader less: measured on 2 cores (session 15), 1,000
    # answers cost the event loop ~17 us each written twice, ~10 us written once, and the
    # kernel's share of the loop's time answering a burst of long-polls was ~45%.
    cycle = getattr(send, "__self__", None)
    transport = getattr(cycle, "transport", None)
    held = _HeldWrites(transport) if transport is not None and hasattr(transport, "write") else None
    if held is not None:
        cycle.transport = held  # type: ignore[union-attr]
    try:
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
    finally:
        if held is not None:
            cycle.transport = transport  # type: ignore[union-attr]
            held.flush()


class _HeldWrites:
    """Stands in for a uvicorn connection's transport while one answer is sent: the first
    write (status line and headers) is held and goes out with the next (the body). Anything
    else is the transport's own, once what is held has gone out."""

    __slots__ = ("held", "transport")

    def __init__(self, transport: Any) -> None:
        self.transport = transport
        self.held = b""

    def write(self, data: bytes) -> None:
        if self.held:
            data, self.held = self.held + data, b""
            self.transport.write(data)
        else:
            self.held = data

    def flush(self) -> None:
        if self.held:
            data, self.held = self.held, b""
            self.transport.write(data)

    def __getattr__(self, name: str) -> Any:
        self.flush()
        return getattr(self.transport, name)
