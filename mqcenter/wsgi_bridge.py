"""HTTP requests to Django's WSGI handler on a pool of threads, one hop each way.

a2wsgi's own middleware hops from its thread to the event loop and waits there for each
piece it hands over: the body, the response's start, each chunk and the end, four or five
round trips through the loop per request, each a wake-up of the loop and of the thread and a
hand-over of the GIL. Here the loop reads the body first, the thread runs Django and returns
the whole answer, and the loop sends it: one hop there and one back (produce ~1.2x, idle
latency ~0.93x with `python -m bench.ab`: `bench/results/ab_issue40.md`, "One hop per
request"). a2wsgi still builds the WSGI environ and reads the bodies below.

What one hop cannot carry is handed over as a2wsgi does: a body sent in chunks without a
Content-Length, or one over DATA_UPLOAD_MAX_MEMORY_SIZE, is read as Django asks for it (and
Django refuses one too large), and a streaming response (NDJSON exports, static files) is
sent chunk by chunk.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import io
from collections.abc import Callable, Coroutine, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from a2wsgi.wsgi import Body, build_environ
from django.conf import settings

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
Send = Callable[[dict[str, Any]], Coroutine[Any, Any, None]]
Answer = tuple[int, list[tuple[bytes, bytes]], list[bytes]]


class WsgiBridge:
    """ASGI app running `app` (WSGI) on `workers` threads."""

    def __init__(self, app: WSGIApp, workers: int) -> None:
        self.app = app
        self.executor = ThreadPoolExecutor(workers, thread_name_prefix="WSGI")

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Send) -> None:
        loop = asyncio.get_running_loop()
        length = _content_length(scope)
        body: Any
        if length is None or length > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
            body = Body(loop, receive)
        else:
            read = await read_body(receive)
            if read is None:
                return  # the client went away: there is no one to answer
            body = io.BytesIO(read)
        environ: dict[str, Any] = build_environ(scope, body)  # type: ignore[arg-type, assignment]
        run = functools.partial(contextvars.copy_context().run, self._run, environ, loop, send)
        answer = await loop.run_in_executor(self.executor, run)
        if answer is not None:
            status, headers, chunks = answer
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": b"".join(chunks)})

    def _run(self, environ: dict[str, Any], loop: asyncio.AbstractEventLoop, send: Send) -> Answer | None:
        """On a thread: Django's whole answer, or None once a streaming one was sent here."""
        started: list[tuple[int, list[tuple[bytes, bytes]]]] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
            encoded = [(k.strip().lower().encode("latin1"), v.strip().encode("latin1")) for k, v in headers]
            started[:] = [(int(status.split(" ", 1)[0]), encoded)]
            return _no_write

        iterable = self.app(environ, start_response)
        try:
            if not getattr(iterable, "streaming", False):
                return (*started[0], list(iterable))

            def hand_over(message: dict[str, Any]) -> None:
                asyncio.run_coroutine_threadsafe(send(message), loop).result()

            status, headers = started[0]
            hand_over({"type": "http.response.start", "status": status, "headers": headers})
            for chunk in iterable:
                hand_over({"type": "http.response.body", "body": chunk, "more_body": True})
            hand_over({"type": "http.response.body", "body": b""})
            return None
        finally:
            getattr(iterable, "close", lambda: None)()


def _no_write(data: bytes) -> None:
    raise NotImplementedError("write() is not supported: return the body from the app")


def _content_length(scope: dict[str, Any]) -> int | None:
    """The body's announced length: 0 when none is announced, None when it comes in chunks."""
    headers = dict(scope["headers"])
    if b"transfer-encoding" in headers:
        return None
    length = headers.get(b"content-length", b"0")
    return int(length) if length.isdigit() else None


async def read_body(receive: Any) -> bytes | None:
    """The whole body of a request, or None if the client went away first."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)
