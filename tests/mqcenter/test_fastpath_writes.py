"""The fast path's answers go out in one write each (`mqcenter.fastpath._respond`): uvicorn
would write the status line and headers, then the body. Driven through uvicorn's own HTTP
protocol, with a transport that records what is written to the socket."""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from mqcenter.fastpath import _respond

REQUEST = b"POST /api/v1/pull HTTP/1.1\r\nHost: broker\r\nContent-Length: 2\r\n\r\n{}"


class RecordingTransport(asyncio.Transport):
    """The socket's side of a connection: keeps each write."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = self.closed_when_answered = False

    def write(self, data: Any) -> None:
        assert not self.closed, "written after the close"
        self.writes.append(bytes(data))

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 8000)}.get(name, default)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def _served(app: Any, request: bytes = REQUEST, answers: int = 1) -> RecordingTransport:
    async def serve() -> RecordingTransport:
        protocol = HttpToolsProtocol(Config(app=app, lifespan="off", server_header=False), ServerState(), {})
        transport = RecordingTransport()
        protocol.connection_made(transport)
        protocol.data_received(request)
        for _ in range(200):
            if len(transport.writes) >= answers and protocol.cycle.response_complete:  # type: ignore[union-attr]
                break
            await asyncio.sleep(0.005)
        transport.closed_when_answered = transport.closed
        protocol.connection_lost(None)
        return transport

    return asyncio.run(serve())


async def answer(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await receive()
    await _respond(send, 200, b'{"messages":[]}', [(b"retry-after", b"1")])


def test_an_answer_is_one_write_of_the_whole_response() -> None:
    transport = _served(answer)

    [written] = transport.writes
    head, _, body = written.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0] == b"HTTP/1.1 200 OK"
    assert b"content-length: 15" in head.split(b"\r\n") and b"retry-after: 1" in head.split(b"\r\n")
    assert body == b'{"messages":[]}'


def test_the_connection_is_served_as_before_after_the_answer() -> None:
    # Two requests on one kept-alive connection: the transport is uvicorn's own again after
    # the first answer, and the second answer is whole too.
    transport = _served(answer, REQUEST * 2, answers=2)

    assert len(transport.writes) == 2 and transport.writes[0] == transport.writes[1]
    assert not transport.closed_when_answered


def test_a_send_that_is_not_uvicorns_gets_both_messages() -> None:
    # Under another server (or a test client) `send` has no transport to hold writes on.
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(_respond(send, 201, b"{}"))

    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert sent[0]["status"] == 201 and sent[1]["body"] == b"{}"


def test_a_connection_the_client_closes_gets_its_whole_answer_before_the_close() -> None:
    # With "Connection: close" uvicorn closes the transport right after the body: through
    # the stand-in, which sends what it holds first.
    request = REQUEST.replace(b"Host: broker\r\n", b"Host: broker\r\nConnection: close\r\n")

    transport = _served(answer, request)

    [written] = transport.writes
    assert written.startswith(b"HTTP/1.1 200 OK") and written.endswith(b'{"messages":[]}')
    assert b"connection: close" in written.split(b"\r\n\r\n")[0].split(b"\r\n")
    assert transport.closed_when_answered


def test_headers_held_when_uvicorn_closes_without_a_body_go_out_before_the_close() -> None:
    # A HEAD answer has no body write: uvicorn closes straight after the headers, and the
    # stand-in sends them on the way to the transport's close.
    request = REQUEST.replace(b"POST", b"HEAD").replace(b"Host: broker\r\n", b"Host: broker\r\nConnection: close\r\n")

    transport = _served(answer, request)

    [written] = transport.writes
    assert written.startswith(b"HTTP/1.1 200 OK") and written.endswith(b"\r\n\r\n")
    assert transport.closed_when_answered
