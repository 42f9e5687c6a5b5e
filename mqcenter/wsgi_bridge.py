"""HTTP requests to Django's WSGI handler on a pool of threads, one hop each way.

a2wsgi's own middleware hops from its thread to the event loop and waits there for each
piece it hands over: the body, the response's start, each chunk and the end, four or five
round trips through the loop per request, each a wake-up of the loop and of the thread and a
hand-over of the GIL. Here the loop reads the body first, the thread runs Django and returns
the whole answer, and the loop sends it: one hop there and one back (produce ~1.2x, idle
latency ~0.93x with `python -m bench.ab`: `bench/results/ab_issue40.md`, "One hop per
request"). a2wsgi still builds the WSGI environ and reads the bodies below.

What one hop cannot carry is handed over as a2wsgi does. A body is read ahead only up to
READ_AHEAD_BYTES, what uvicorn buffers for a connection anyway: a larger one, or one sent in
chunks without a Content-Length, waits in the client until Django asks for it (after
authentication and the size check, which refuses one over DATA_UPLOAD_MAX_MEMORY_SIZE), so
memory grows with the threads at work, not with the connections open. A streaming response
(NDJSON exports, static files) is sent chunk by chunk.
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

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
Send = Callable[[dict[str, Any]], Coroutine[Any, Any, None]]
Answer = tuple[int, list[tuple[bytes, bytes]], bytes]
# uvicorn's flow control pauses reading a connection past 64 KiB (its HIGH_WATER_LIMIT). A
# produce of 100 messages of 200 bytes is ~25 KiB, a pull carrying 100 acks less.
READ_AHEAD_BYTES = 64 * 1024


class WsgiBridge:
    """ASGI app running `app` (WSGI) on `workers` threads."""

    def __init__(self, app: WSGIApp, workers: int) -> None:
        self.app = app
        self.executor = ThreadPoolExecutor(workers, thread_name_prefix="WSGI")

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Send) -> None:
        loop = asyncio.get_running_loop()
        length = content_length(scope)
        body: Any
        if length is None or length > READ_AHEAD_BYTES:
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
            status, headers, content = answer
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": content})

    def _run(self, environ: dict[str, Any], loop: asyncio.AbstractEventLoop, send: Send) -> Answer | None:
        """On a thread: Django's whole answer, or None once a streaming one was sent here."""
        started: list[tuple[int, list[tuple[bytes, bytes]]]] = []
        sent = False

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
            if exc_info is not None and sent:
                raise exc_info[1].with_traceback(exc_info[2])
            if started and exc_info is None:
                raise RuntimeError("start_response was called twice without exc_info")
            encoded = [(k.strip().lower().encode("latin1"), v.strip().encode("latin1")) for k, v in headers]
            started[:] = [(int(status.split(" ", 1)[0]), encoded)]
            return _no_write

        iterable = self.app(environ, start_response)
        try:
            # Django's responses say whether they stream; an iterable that cannot say is streamed.
            if not getattr(iterable, "streaming", not isinstance(iterable, list | tuple)):
                content = b"".join(iterable)
                return (*started[0], content)

            def hand_over(message: dict[str, Any]) -> None:
                nonlocal sent
                if not sent:
                    sent = True
                    status, headers = started[0]
                    hand_over({"type": "http.response.start", "status": status, "headers": headers})
                asyncio.run_coroutine_threadsafe(send(message), loop).result()

            for chunk in iterable:
                hand_over({"type": "http.response.body", "body": chunk, "more_body": True})
            hand_over({"type": "http.response.body", "body": b""})
            return None
        finally:
            getattr(iterable, "close", lambda: None)()


def _no_write(data: bytes) -> None:
    raise NotImplementedError("write() is not supported: return the body from the app")


def content_length(scope: dict[str, Any]) -> int | None:
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
