"""The WSGI bridge (mqcenter/wsgi_bridge.py): Django's answers reach the client whole, whether
they came in one hop (a body of known length, a plain response) or piece by piece (a body
in chunks, one over the size limit, a streaming response), and a client that goes away
before its body ends runs nothing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.core.wsgi import get_wsgi_application
from django.test import override_settings

from messages.models import Message
from mqcenter.wsgi_bridge import WsgiBridge
from tests.conftest import make_api
from topics.models import Biz

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def token() -> str:
    return make_api(["produce:*"], Biz.objects.create(name="shop")).token


def call(method: str, path: str, token: str = "", content: Any = None, headers: dict[str, str] | None = None) -> httpx.Response:
    bridge = WsgiBridge(get_wsgi_application(), workers=2)

    async def send() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=bridge), base_url="http://testserver") as client:
            auth = {"Authorization": f"Bearer {token}"} if token else {}
            return await client.request(method, path, content=content, headers={**auth, **(headers or {})}, timeout=30)

    try:
        return asyncio.run(send())
    finally:
        bridge.executor.shutdown()


def produce_body(*data: Any) -> bytes:
    return json.dumps({"messages": [{"topic": "orders", "data": d} for d in data]}).encode()


def test_a_request_of_known_length_is_answered_whole(token: str) -> None:
    answer = call("POST", "/api/v1/messages", token, produce_body(1, 2), {"Content-Type": "application/json"})
    assert answer.status_code == 201, answer.text
    assert int(answer.headers["content-length"]) == len(answer.content)
    ids = [m["id"] for m in answer.json()["messages"]]
    assert sorted(Message.objects.values_list("data", flat=True)) == ["1", "2"]
    assert set(Message.objects.values_list("id", flat=True)) == set(ids)


def test_a_body_in_chunks_is_read_as_django_reads_it(token: str) -> None:
    body = produce_body(1)

    async def chunks() -> AsyncIterator[bytes]:
        yield body[:10]
        yield body[10:]

    # Without a Content-Length Django reads no body: a clear 400, as on any WSGI server.
    answer = call("POST", "/api/v1/messages", token, chunks(), {"Content-Type": "application/json"})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "invalid_request"
    assert not Message.objects.exists()


def scope(method: str, path: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {"type": "http", "method": method, "path": path, "raw_path": path.encode(), "query_string": b"",
            "root_path": "", "scheme": "http", "http_version": "1.1", "server": ("testserver", 80),
            "client": ("127.0.0.1", 5000), "headers": [(b"host", b"testserver"), *headers]}


def asgi_call(request: dict[str, Any], arrivals: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages the bridge sends for `request`, whose body comes as `arrivals` (those
    it never asked for are left in the list)."""
    bridge = WsgiBridge(get_wsgi_application(), workers=2)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return arrivals.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    try:
        asyncio.run(bridge(request, receive, send))
    finally:
        bridge.executor.shutdown()
    return sent


def produce_request(token: str, length: int) -> dict[str, Any]:
    return scope("POST", "/api/v1/messages", [
        (b"content-type", b"application/json"), (b"authorization", f"Bearer {token}".encode()),
        (b"content-length", str(length).encode())])


def test_a_body_over_the_limit_is_refused_unread(token: str) -> None:
    body = produce_body("x" * 2_000)
    arrivals = [{"type": "http.request", "body": body, "more_body": False}]
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1_000):
        sent = asgi_call(produce_request(token, len(body)), arrivals)
    assert sent[0]["status"] == 413
    assert json.loads(b"".join(m.get("body", b"") for m in sent[1:]))["error"]["code"] == "payload_too_large"
    assert len(arrivals) == 1, "the body was read"
    assert not Message.objects.exists()


def test_a_streaming_answer_is_sent_chunk_by_chunk() -> None:
    # WhiteNoise streams a static file in blocks.
    path = settings.BASE_DIR / "static" / "console" / "htmx.min.js"
    sent = asgi_call(scope("GET", "/static/console/htmx.min.js", []), [{"type": "http.request", "body": b""}])
    assert sent[0]["status"] == 200
    chunks = [m["body"] for m in sent[1:] if m["body"]]
    assert len(chunks) > 1
    assert all(m["more_body"] for m in sent[1:-1]) and not sent[-1].get("more_body")
    assert b"".join(chunks) == path.read_bytes()


def test_a_client_gone_before_its_body_ends_runs_nothing(token: str) -> None:
    body = produce_body(1)
    arrivals = [{"type": "http.request", "body": body[:10], "more_body": True}, {"type": "http.disconnect"}]
    assert asgi_call(produce_request(token, len(body)), arrivals) == []
    assert not arrivals
    assert not Message.objects.exists()
