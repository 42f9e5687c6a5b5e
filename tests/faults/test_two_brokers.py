"""Two broker processes sharing one database: leases, ordering and dedup hold across them."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.server import BrokerServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def brokers() -> Iterator[tuple[BrokerServer, list[str]]]:
    server = BrokerServer("twobrokers", extra_env={"MQ_LEASE_GRACE_SECONDS": "1"}).setup()
    try:
        yield server, [server.start(), server.start()]
    finally:
        server.teardown()


def create_topic(client: httpx.Client, name: str, mode: str) -> None:
    response = client.post("/api/v1/topics", json={"topic": name, "groups": [{"group": "g", "mode": mode}]})
    assert response.status_code == 201, response.text


def produce(client: httpx.Client, topic: str, keys: list[str | None]) -> list[int]:
    ids: list[int] = []
    for start in range(0, len(keys), 100):
        body = {"messages": [{"topic": topic, "group": "g", "data": n + start, "key": key}
                             for n, key in enumerate(keys[start:start + 100])]}
        response = client.post("/api/v1/messages", json=body)
        assert response.status_code == 201, response.text
        ids += [m["id"] for m in response.json()["messages"]]
    return ids


def consume_across(server: BrokerServer, urls: list[str], topic: str, total: int, consumers: int = 4) -> tuple[list[dict[str, Any]], int, int]:
    """Consumers alternate between the brokers; returns the processing log, the most messages
    of one key (or of the group, key None) in flight at once, and deliveries."""
    log: list[dict[str, Any]] = []
    in_flight: Counter[Any] = Counter()
    peak = {"value": 0}
    lock = threading.Lock()
    done = threading.Event()

    def run(index: int) -> None:
        clients = [server.client(url) for url in urls]
        name = f"c{index}"
        turn = index
        deadline = time.monotonic() + 120
        while not done.is_set() and time.monotonic() < deadline:
            client = clients[turn % 2]
            turn += 1
            messages = client.post("/api/v1/pull", json={
                "topic": topic, "group": "g", "consumer": name, "max_messages": 5, "wait_seconds": 0.2,
            }).json()["messages"]
            with lock:
                for m in messages:
                    in_flight[m["key"]] += 1
                    peak["value"] = max(peak["value"], in_flight[m["key"]])
                    log.append(m)
                if len(log) >= total:
                    done.set()
            time.sleep(0.003)
            with lock:
                for m in messages:
                    in_flight[m["key"]] -= 1
            if messages:
                clients[turn % 2].post("/api/v1/ack", json={
                    "consumer": name, "results": [{"id": m["id"], "status": "SUCCESS"} for m in messages]})
        for client in clients:
            client.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(consumers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=150)
    return log, peak["value"], len(log)


def test_it_keeps_a_serial_group_in_order_across_two_brokers(brokers: Any) -> None:
    server, urls = brokers
    with server.client(urls[0]) as client:
        create_topic(client, "serial2", "serial")
        ids = produce(client, "serial2", [None] * 80)

    log, peak, delivered = consume_across(server, urls, "serial2", total=80)

    assert [m["id"] for m in log] == ids
    assert peak == 1
    assert delivered == 80


def test_it_orders_each_key_across_two_brokers_when_sharded(brokers: Any) -> None:
    server, urls = brokers
    keys = [f"k{n % 6}" for n in range(180)]
    with server.client(urls[0]) as client:
        create_topic(client, "sharded2", "sharded")
        ids = produce(client, "sharded2", keys)

    log, peak, delivered = consume_across(server, urls, "sharded2", total=180)

    assert delivered == 180
    assert peak == 1, "two messages of one key ran at once"
    for key in set(keys):
        seen = [m["id"] for m in log if m["key"] == key]
        assert seen == [i for i, k in zip(ids, keys, strict=True) if k == key]


def test_it_stores_one_message_when_both_brokers_get_the_same_dedup_key(brokers: Any) -> None:
    server, urls = brokers
    for round_ in range(8):
        barrier = threading.Barrier(2)
        answers: list[dict[str, Any]] = []

        def send(url: str, round_: int = round_) -> None:
            with server.client(url) as client:
                barrier.wait()
                response = client.post("/api/v1/messages", json={"messages": [
                    {"topic": "dedup2", "data": round_, "dedup_key": f"k{round_}"}]})
                answers.append(response.json()["messages"][0])

        threads = [threading.Thread(target=send, args=(url,)) for url in urls]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert answers[0]["id"] == answers[1]["id"]
        assert sorted(a["duplicate"] for a in answers) == [False, True]
    assert server.sql("SELECT COUNT(*) FROM mq_message WHERE topic = 'dedup2'")[0][0] == 8


def test_it_recovers_a_lease_taken_on_one_broker_through_the_other(brokers: Any) -> None:
    server, urls = brokers
    with server.client(urls[0]) as first, server.client(urls[1]) as second:
        first.post("/api/v1/topics", json={"topic": "lease2", "retry_interval_seconds": 0})
        produced = first.post("/api/v1/messages", json={"messages": [
            {"topic": "lease2", "data": 1, "timeout_seconds": 1, "retry_count": 1}]}).json()["messages"][0]
        taken = first.post("/api/v1/pull", json={"topic": "lease2", "consumer": "dies"}).json()["messages"]
        assert [m["id"] for m in taken] == [produced["id"]]
        again = second.post("/api/v1/pull", json={"topic": "lease2", "consumer": "lives", "wait_seconds": 10}).json()["messages"]
        late = first.post("/api/v1/ack", json={"consumer": "dies", "results": [{"id": produced["id"], "status": "SUCCESS"}]})
        ok = second.post("/api/v1/ack", json={"consumer": "lives", "results": [{"id": produced["id"], "status": "SUCCESS"}]})

    assert [m["id"] for m in again] == [produced["id"]]
    assert again[0]["attempt"] == 2
    assert late.json()["results"] == [{"id": produced["id"], "outcome": "stale"}]
    assert ok.json()["results"] == [{"id": produced["id"], "outcome": "success"}]
