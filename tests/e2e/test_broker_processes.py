"""End to end against real `manage.py runbroker` processes over HTTP."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.server import ROOT, BrokerServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def two_brokers() -> Iterator[tuple[BrokerServer, str, str]]:
    server = BrokerServer("core").setup()
    try:
        first, second = server.start(), server.start()
        yield server, first, second
    finally:
        server.teardown()


def produce(client: httpx.Client, topic: str, data: Any, **fields: Any) -> dict[str, Any]:
    response = client.post("/api/v1/messages", json={"messages": [{"topic": topic, "data": data, **fields}]})
    assert response.status_code == 201, response.text
    return response.json()["messages"][0]


def pull_later(client: httpx.Client, body: dict[str, Any]) -> tuple[threading.Thread, dict[str, Any]]:
    """Start a long-poll in a thread; the result dict gets the response and when it came."""
    result: dict[str, Any] = {}

    def run() -> None:
        result["response"] = client.post("/api/v1/pull", json=body)
        result["at"] = time.monotonic()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, result


def test_it_wakes_a_waiting_pull_within_milliseconds_of_a_produce(two_brokers: Any) -> None:
    server, first, _ = two_brokers
    with server.client(first) as consumer, server.client(first) as producer:
        thread, result = pull_later(consumer, {"topic": "wake", "consumer": "c1", "wait_seconds": 20})
        wait_until(lambda: server.waiting_pulls() >= 1, what="the pull to wait")
        assert "response" not in result, "the pull returned before anything was produced"
        sent_at = time.monotonic()
        stored = produce(producer, "wake", {"hello": 1})
        thread.join(timeout=25)

    delivered = result["response"].json()["messages"]
    assert [m["id"] for m in delivered] == [stored["id"]]
    assert result["at"] - sent_at < 1.0, "the long-poll was not woken by the produce"


def test_it_wakes_a_pull_waiting_on_another_broker_process(two_brokers: Any) -> None:
    server, first, second = two_brokers
    with server.client(first) as consumer, server.client(second) as producer:
        # Warm the second process's connection so the measured time is the wake-up alone.
        produce(producer, "warmup", 0)
        thread, result = pull_later(consumer, {"topic": "cross", "consumer": "c2", "wait_seconds": 20})
        wait_until(lambda: server.waiting_pulls() >= 1, what="the pull to wait")
        sent_at = time.monotonic()
        stored = produce(producer, "cross", "over redis")
        thread.join(timeout=25)

    assert [m["id"] for m in result["response"].json()["messages"]] == [stored["id"]]
    assert result["at"] - sent_at < 1.0


def test_it_answers_an_empty_list_when_the_wait_ends(two_brokers: Any) -> None:
    server, first, _ = two_brokers
    with server.client(first) as client:
        started = time.monotonic()
        response = client.post("/api/v1/pull", json={"topic": "quiet", "consumer": "c3", "wait_seconds": 1})
    assert response.status_code == 200
    assert response.json() == {"messages": []}
    assert 0.9 <= time.monotonic() - started < 5


def test_it_delivers_a_delayed_message_when_it_comes_due_to_a_waiting_pull(two_brokers: Any) -> None:
    server, first, _ = two_brokers
    with server.client(first) as client:
        stored = produce(client, "later", "soon", delay_seconds=1.5)
        produced_at = time.monotonic()
        response = client.post("/api/v1/pull", json={"topic": "later", "consumer": "c4", "wait_seconds": 10})
        waited = time.monotonic() - produced_at
    assert [m["id"] for m in response.json()["messages"]] == [stored["id"]]
    assert 1.3 <= waited < 3.0


def test_it_lists_every_running_broker_process_in_the_registry(two_brokers: Any) -> None:
    server, first, second = two_brokers
    with server.client(first) as client:
        deadline = time.monotonic() + 10
        urls: set[str] = set()
        while time.monotonic() < deadline and urls != {first, second}:
            urls = {b["url"] for b in client.get("/api/v1/registry/brokers").json()}
            time.sleep(0.2)
        beat = client.post(
            "/api/v1/registry/consumers",
            json={"consumer": "c5", "subscriptions": [{"topic": "t", "group": "g"}]},
        ).json()
    assert urls == {first, second}
    assert set(beat["brokers"]) == {first, second}
    assert beat["subscriptions"] == [{"topic": "t", "group": "g", "mode": "queue", "rank": 0, "total": 1}]


def test_it_runs_produce_pull_and_ack_on_the_embedded_sqlite_default(tmp_path: Path) -> None:
    server = BrokerServer(
        "sqlite", database_url=f"sqlite:///{tmp_path / 'mq.sqlite3'}",
        extra_env={"REDIS_URL": "", "MQ_VAR_DIR": str(ROOT / "var" / "e2e-sqlite")},
    ).setup()
    try:
        url = server.start()
        with server.client(url) as client:
            thread, result = pull_later(client, {"topic": "lite", "consumer": "c1", "wait_seconds": 10, "max_messages": 10})
            time.sleep(0.3)
            response = client.post("/api/v1/messages", json={"messages": [
                {"topic": "lite", "data": {"n": n}, "dedup_key": f"d{n}"} for n in range(3)
            ]})
            assert response.status_code == 201
            thread.join(timeout=15)
            first = result["response"].json()["messages"]
            rest = client.post("/api/v1/pull", json={"topic": "lite", "consumer": "c1", "max_messages": 10}).json()["messages"]
            delivered = first + rest
            assert sorted(m["data"]["n"] for m in delivered) == [0, 1, 2]
            acked = client.post("/api/v1/ack", json={"consumer": "c1", "results": [
                {"id": m["id"], "status": "SUCCESS"} for m in delivered
            ]}).json()["results"]
            assert {r["outcome"] for r in acked} == {"success"}
            again = client.post("/api/v1/messages", json={"messages": [{"topic": "lite", "data": 0, "dedup_key": "d0"}]})
            assert again.json()["messages"][0]["duplicate"] is True
            stats = client.get("/api/v1/stats").json()["stats"]
            assert stats[0]["counts"]["SUCCESS"] == 3
    finally:
        server.teardown()
