"""The long-poll layer (mqcenter/longpoll.py): a pull with nothing to claim waits on the event
loop and is answered when woken, with the headers Django gave the request; the park between
attempts never reaches the client."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.core.wsgi import get_wsgi_application
from django.test import override_settings

from messages.models import Message, Status
from mqcenter.core.auth import principal_for_token
from mqcenter.longpoll import LongPoll, parked_pulls
from mqcenter.wsgi_bridge import READ_AHEAD_BYTES, WsgiBridge
from tests.conftest import make_api
from tests.support.asgi import asgi_messages, http_scope
from topics.models import Biz

pytestmark = pytest.mark.django_db(transaction=True)


class Broker:
    """The broker's HTTP stack (long-poll layer over Django under WSGI), built under the
    settings in force, on an event loop of its own as uvicorn runs it."""

    def __init__(self) -> None:
        app = LongPoll(WsgiBridge(get_wsgi_application(), workers=8))  # type: ignore[arg-type]
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="https://testserver")

    def post(self, path: str, body: Any, token: str) -> httpx.Response:
        call = self.client.post(path, content=json.dumps(body), timeout=30, headers={
            "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        return asyncio.run_coroutine_threadsafe(call, self.loop).result(timeout=30)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.client.aclose(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


@pytest.fixture
def broker() -> Iterator[Broker]:
    with override_settings(SECURE_HSTS_SECONDS=3600):  # as MQ_TLS sets it
        stack = Broker()
    try:
        yield stack
    finally:
        stack.close()


@pytest.fixture
def tokens() -> dict[str, str]:
    shop = Biz.objects.create(name="shop")
    return {"produce": make_api(["produce:*"], shop).token, "consume": make_api(["consume:*"], shop).token}


def waiting_pulls_reach(count: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while parked_pulls() < count:
        assert time.monotonic() < deadline, "the pull never started waiting"
        time.sleep(0.01)


def test_a_waiting_pull_is_answered_when_a_produce_commits(broker: Broker, tokens: dict[str, str]) -> None:
    broker.post("/api/v1/messages", {"messages": [{"topic": "lp", "data": 0}]}, tokens["produce"])
    assert len(broker.post("/api/v1/pull", {"topic": "lp", "consumer": "c"}, tokens["consume"]).json()["messages"]) == 1
    answer: dict[str, Any] = {}

    def pull() -> None:
        answer["response"] = broker.post("/api/v1/pull", {"topic": "lp", "consumer": "c", "wait_seconds": 20},
                                         tokens["consume"])
        answer["at"] = time.monotonic()

    waiter = threading.Thread(target=pull)
    waiter.start()
    waiting_pulls_reach(1)
    produced_at = time.monotonic()
    [stored] = broker.post("/api/v1/messages", {"messages": [{"topic": "lp", "data": 1}]},
                           tokens["produce"]).json()["messages"]
    waiter.join(timeout=25)

    response = answer["response"]
    assert response.status_code == 200
    assert [m["id"] for m in response.json()["messages"]] == [stored["id"]]
    assert answer["at"] - produced_at < 5, "woken by the fallback poll, not the produce"


def test_a_park_never_reaches_the_client(broker: Broker, tokens: dict[str, str]) -> None:
    started = time.monotonic()
    response = broker.post("/api/v1/pull", {"topic": "quiet", "consumer": "c", "wait_seconds": 0.3}, tokens["consume"])

    assert time.monotonic() - started >= 0.25
    assert response.status_code == 200 and response.json() == {"messages": []}
    assert not [name for name in response.headers if name.lower().startswith("x-mq")]


def test_a_woken_answer_carries_the_headers_django_gives_an_immediate_one(broker: Broker, tokens: dict[str, str]) -> None:
    broker.post("/api/v1/messages", {"messages": [{"topic": "hdr", "data": 0}]}, tokens["produce"])
    immediate = broker.post("/api/v1/pull", {"topic": "hdr", "consumer": "c"}, tokens["consume"])
    answer: dict[str, httpx.Response] = {}
    waiter = threading.Thread(target=lambda: answer.setdefault("r", broker.post(
        "/api/v1/pull", {"topic": "hdr", "consumer": "c", "wait_seconds": 20}, tokens["consume"])))
    waiter.start()
    waiting_pulls_reach(1)
    broker.post("/api/v1/messages", {"messages": [{"topic": "hdr", "data": 1}]}, tokens["produce"])
    waiter.join(timeout=25)
    woken = answer["r"]

    def shown(response: httpx.Response) -> dict[str, str]:
        return {k: v for k, v in response.headers.items() if k not in ("content-length", "date")}

    assert len(woken.json()["messages"]) == 1
    assert shown(woken) == shown(immediate)
    assert woken.headers["strict-transport-security"] == "max-age=3600"
    assert woken.headers["content-type"] == "application/json"


def test_a_burst_hands_every_waiting_pull_its_own_message(broker: Broker, tokens: dict[str, str]) -> None:
    """Pulls woken together are claimed for together (`mqcenter/pull_batches.py`): each
    message reaches exactly one pull, and every pull gets one."""
    broker.post("/api/v1/messages", {"messages": [{"topic": "burst", "data": -1}]}, tokens["produce"])
    assert len(broker.post("/api/v1/pull", {"topic": "burst", "consumer": "c"}, tokens["consume"]).json()["messages"]) == 1
    count = 24
    answers: list[httpx.Response] = []
    lock = threading.Lock()

    def pull(i: int) -> None:
        response = broker.post("/api/v1/pull", {"topic": "burst", "consumer": f"w{i}", "wait_seconds": 20},
                               tokens["consume"])
        with lock:
            answers.append(response)

    waiters = [threading.Thread(target=pull, args=(i,)) for i in range(count)]
    for waiter in waiters:
        waiter.start()
    waiting_pulls_reach(count)
    stored = broker.post("/api/v1/messages", {"messages": [{"topic": "burst", "data": i} for i in range(count)]},
                         tokens["produce"]).json()["messages"]
    for waiter in waiters:
        waiter.join(timeout=25)

    assert [a.status_code for a in answers] == [200] * count
    handed = [m["id"] for a in answers for m in a.json()["messages"]]
    assert sorted(handed) == sorted(m["id"] for m in stored)
    assert all(len(a.json()["messages"]) == 1 for a in answers)


def big_pull(ids: list[int]) -> dict[str, Any]:
    """A waiting pull carrying acks whose logs take it past the read-ahead."""
    log = "x" * (READ_AHEAD_BYTES // len(ids) + 100)
    return {"topic": "big", "consumer": "c", "wait_seconds": 20,
            "results": [{"id": i, "status": "SUCCESS", "log": log} for i in ids]}


@pytest.mark.parametrize("tokens_sent", [[], ["mq_unknown_0000000000"], ["known", "known"]],
                         ids=["no token", "an unknown token", "a known token twice"])
def test_a_pull_past_the_read_ahead_is_read_only_for_a_known_token(tokens_sent: list[str]) -> None:
    known = make_api(["consume:*"], Biz.objects.create(name="shop")).token
    principal_for_token(known)  # as the consumer's earlier pulls left it: in the token cache
    body = json.dumps(big_pull([1, 2])).encode()
    assert len(body) > READ_AHEAD_BYTES
    arrivals = [{"type": "http.request", "body": body, "more_body": False}]
    authorization = [(b"authorization", f"Bearer {known if t == 'known' else t}".encode()) for t in tokens_sent]
    request = http_scope("POST", "/api/v1/pull", [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *authorization])
    bridge = WsgiBridge(get_wsgi_application(), workers=2)
    try:
        sent = asgi_messages(LongPoll(bridge), request, arrivals)  # type: ignore[arg-type]
    finally:
        bridge.executor.shutdown()

    assert sent[0]["status"] == 401
    assert json.loads(b"".join(m.get("body", b"") for m in sent[1:]))["error"]["code"] == "unauthenticated"
    assert len(arrivals) == 1, "the body of a pull without a known token was read"


def test_a_pull_past_the_read_ahead_with_a_known_token_still_waits(broker: Broker, tokens: dict[str, str]) -> None:
    broker.post("/api/v1/messages", {"messages": [{"topic": "big", "data": i} for i in range(2)]}, tokens["produce"])
    held = [m["id"] for m in broker.post("/api/v1/pull", {"topic": "big", "consumer": "c", "max_messages": 2},
                                         tokens["consume"]).json()["messages"]]
    answer: dict[str, httpx.Response] = {}
    waiter = threading.Thread(target=lambda: answer.setdefault("r", broker.post(
        "/api/v1/pull", big_pull(held), tokens["consume"])))
    waiter.start()
    waiting_pulls_reach(1)
    [stored] = broker.post("/api/v1/messages", {"messages": [{"topic": "big", "data": 2}]},
                           tokens["produce"]).json()["messages"]
    waiter.join(timeout=25)

    woken = answer["r"].json()
    assert [m["id"] for m in woken["messages"]] == [stored["id"]]
    assert [r["id"] for r in woken["results"]] == held
    assert set(Message.objects.filter(id__in=held).values_list("status", flat=True)) == {Status.SUCCESS}
