"""The WSGI bridge (mqcenter/wsgi_bridge.py): Django's answers reach the client whole, whether
they came in one hop (a small body of known length, a plain response) or piece by piece (a
large body, one in chunks, a streaming response); a body beyond the read-ahead is taken from
the client only when Django asks for it, and a client that goes away before its body ends
runs nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.conf import settings
from django.core.wsgi import get_wsgi_application
from django.test import override_settings

from messages.models import Message
from mqcenter.wsgi_bridge import READ_AHEAD_BYTES, WsgiBridge
from tests.conftest import make_api
from tests.support.asgi import asgi_messages, http_scope
from topics.models import Biz

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def token() -> str:
    return make_api(["produce:*"], Biz.objects.create(name="shop")).token


def produce_body(*data: Any) -> bytes:
    return json.dumps({"messages": [{"topic": "orders", "data": d} for d in data]}).encode()


def asgi_call(request: dict[str, Any], arrivals: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages the bridge sends for `request`, whose body comes as `arrivals` (those
    it never asked for are left in the list)."""
    bridge = WsgiBridge(get_wsgi_application(), workers=2)
    try:
        return asgi_messages(bridge, request, arrivals)
    finally:
        bridge.executor.shutdown()


def produce_request(token: str, length: int | None) -> dict[str, Any]:
    size = [(b"content-length", str(length).encode())] if length is not None else [(b"transfer-encoding", b"chunked")]
    return http_scope("POST", "/api/v1/messages", [
        (b"content-type", b"application/json"), (b"authorization", f"Bearer {token}".encode()), *size])


def answer_of(sent: list[dict[str, Any]]) -> tuple[int, Any]:
    return sent[0]["status"], json.loads(b"".join(m.get("body", b"") for m in sent[1:]))


def test_a_request_of_known_length_is_answered_whole(token: str) -> None:
    body = produce_body(1, 2)
    arrivals = [{"type": "http.request", "body": body[:10], "more_body": True},
                {"type": "http.request", "body": body[10:], "more_body": False}]
    sent = asgi_call(produce_request(token, len(body)), arrivals)
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    status, answer = answer_of(sent)
    assert status == 201, answer
    assert dict(sent[0]["headers"])[b"content-length"] == str(len(sent[1]["body"])).encode()
    assert sorted(Message.objects.values_list("data", flat=True)) == ["1", "2"]
    assert set(Message.objects.values_list("id", flat=True)) == {m["id"] for m in answer["messages"]}


def test_a_large_body_waits_until_django_asks_for_it(token: str) -> None:
    body = produce_body(*["x" * 200] * 400)
    assert len(body) > READ_AHEAD_BYTES
    halves = [body[: len(body) // 2], body[len(body) // 2:]]

    def arrivals() -> list[dict[str, Any]]:
        return [{"type": "http.request", "body": halves[0], "more_body": True},
                {"type": "http.request", "body": halves[1], "more_body": False}]

    # Refused before the view reads it: the body is never taken from the client.
    unread = arrivals()
    status, error = answer_of(asgi_call(produce_request("not-a-token", len(body)), unread))
    assert (status, error["error"]["code"]) == (401, "unauthenticated")
    assert len(unread) == 2
    # Read as Django asks for it, and stored whole.
    read = arrivals()
    status, answer = answer_of(asgi_call(produce_request(token, len(body)), read))
    assert status == 201 and len(answer["messages"]) == 400
    assert read == [] and Message.objects.count() == 400


def test_a_body_in_chunks_is_left_to_django(token: str) -> None:
    # Without a Content-Length Django reads no body: a clear 400, as on any WSGI server, and
    # the chunks stay with the client.
    body = produce_body(1)
    arrivals = [{"type": "http.request", "body": body[:10], "more_body": True},
                {"type": "http.request", "body": body[10:], "more_body": False}]
    status, error = answer_of(asgi_call(produce_request(token, None), arrivals))
    assert (status, error["error"]["code"]) == (400, "invalid_request")
    assert len(arrivals) == 2
    assert not Message.objects.exists()


def test_a_body_over_the_limit_is_refused_unread(token: str) -> None:
    body = produce_body("x" * (READ_AHEAD_BYTES + 1_000))
    arrivals = [{"type": "http.request", "body": body, "more_body": False}]
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=READ_AHEAD_BYTES):
        sent = asgi_call(produce_request(token, len(body)), arrivals)
    assert answer_of(sent)[0] == 413 and answer_of(sent)[1]["error"]["code"] == "payload_too_large"
    assert len(arrivals) == 1, "the body was read"
    assert not Message.objects.exists()


def test_a_streaming_answer_is_sent_chunk_by_chunk() -> None:
    # WhiteNoise streams a static file in blocks.
    path = settings.BASE_DIR / "static" / "console" / "htmx.min.js"
    sent = asgi_call(http_scope("GET", "/static/console/htmx.min.js", []), [{"type": "http.request", "body": b""}])
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
