"""Many consumers waiting at once: `python -m bench.workloads.longpoll_client URL TOKEN TOPIC N`.

Opens N concurrent long-polling pulls (max_messages=1, wait_seconds=30, a distinct consumer
id each, one connection each), prints "ready" once every request is sent, then, when each
answers, records when (time.time()) its last byte arrived. Once all have answered, it decodes
them (status, how many messages, the first one's data) and prints the results as JSON.

A thousand consumers would each run on their own machine; here they share one process, so
whatever the client spends per answer delays every answer after it, and the figure would be
the client's, not the broker's. An HTTP client library spends more CPU per answer than the
broker does writing it (aiohttp: ~100 us against the broker's ~60-80 us on 2 cores), so it
would read the thousand answers slower than the broker writes them. Hence a bare asyncio
protocol on uvloop (~35 us per answer), which in the hot path only finds the end of the
answer and notes the time; parsing waits until the end.
(uvloop comes with uvicorn[standard], the broker's own server.)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from urllib.parse import urlsplit

import uvloop

TIMEOUT_SECONDS = 60


class Pull(asyncio.Protocol):
    """One pull on its own connection: sends the request, keeps the bytes of the answer, and
    notes the time its last byte arrived."""

    def __init__(self, request: bytes, done: asyncio.Future[None]) -> None:
        self.request, self.done = request, done
        self.received = bytearray()
        self.body_at = -1  # where the body starts, once the headers are in
        self.length = 0
        self.at = 0.0
        self.error = ""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no asyncio.Transport
        self.transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        self.received += data
        if self.body_at < 0:
            end = self.received.find(b"\r\n\r\n")
            if end < 0:
                return
            self.body_at = end + 4
            self.length = _content_length(bytes(self.received[:end]))
        if len(self.received) - self.body_at >= self.length:
            self.at = time.time()
            self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.at = time.time()
            self.done.set_result(None)

    def result(self) -> dict[str, object]:
        if not self.at or self.body_at < 0 or len(self.received) - self.body_at < self.length:
            return {"status": 0, "messages": 0, "at": self.at or time.time(),
                    "error": self.error or f"no complete answer ({len(self.received)} bytes)"}
        status = int(self.received.split(b" ", 2)[1])
        body = bytes(self.received[self.body_at:self.body_at + self.length])
        got = json.loads(body).get("messages", []) if status == 200 else []
        return {"status": status, "messages": len(got), "at": self.at,
                "data": got[0]["data"] if got else None,
                "error": "" if status == 200 else body[:200].decode(errors="replace")}


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    raise ValueError("an answer without Content-Length")


def _request(host: str, token: str, body: bytes) -> bytes:
    return (b"POST /api/v1/pull HTTP/1.1\r\nHost: " + host.encode() + b"\r\nAuthorization: Bearer "
            + token.encode() + b"\r\nContent-Type: application/json\r\nAccept: application/json\r\n"
            + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


async def main(url: str, token: str, topic: str, count: int) -> None:
    parts = urlsplit(url)
    loop = asyncio.get_running_loop()
    pulls: list[Pull] = []

    async def connect(i: int) -> None:
        body = json.dumps({"topic": topic, "group": "default", "consumer": f"lp-{i}", "max_messages": 1,
                           "wait_seconds": 30}).encode()
        pull = Pull(_request(parts.netloc, token, body), loop.create_future())
        pulls.append(pull)
        try:
            await loop.create_connection(lambda: pull, parts.hostname, parts.port)
        except OSError as exc:
            pull.at, pull.error = time.time(), repr(exc)
            pull.done.set_result(None)

    await asyncio.gather(*(connect(i) for i in range(count)))
    print("ready", flush=True)
    with contextlib.suppress(TimeoutError):  # those still open are reported as errors
        await asyncio.wait_for(asyncio.gather(*(p.done for p in pulls)), TIMEOUT_SECONDS)
    # Closed only now, as a consumer keeps its connection: a close is work for the broker.
    for pull in pulls:
        if pull.transport is not None:
            pull.transport.close()
    print(json.dumps([p.result() for p in pulls]), flush=True)


if __name__ == "__main__":
    uvloop.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
