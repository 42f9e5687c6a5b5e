"""Priorities against real broker processes: four consumers pulling at once receive every
priority-9 message before any priority-0 one that was due at the same moment."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.server import BrokerServer

pytestmark = pytest.mark.e2e

CONSUMERS = 4
BATCH = 5


@pytest.fixture(scope="module")
def brokers() -> Iterator[tuple[BrokerServer, list[str]]]:
    server = BrokerServer("prio").setup()
    try:
        yield server, [server.start(), server.start()]
    finally:
        server.teardown()


def test_it_delivers_every_9_before_any_0_under_four_concurrent_consumers(brokers: Any) -> None:
    server, urls = brokers
    # One batch: every message is due at the same moment. The lowest ids are the 0s, so
    # delivery in id order would hand them out first; the 4s between them are the bulk.
    priorities = [0] * 40 + [4] * 120 + [9] * 40
    with server.client(urls[0]) as producer:
        response = producer.post(
            "/api/v1/messages",
            json={
                "messages": [
                    {"topic": "prio", "data": n, "priority": p} for n, p in enumerate(priorities)
                ]
            },
        )
        assert response.status_code == 201, response.text
    priority_of = {m["id"]: p for m, p in zip(response.json()["messages"], priorities, strict=True)}

    received: list[tuple[int, int]] = []  # (arrival number, priority)
    arrivals = itertools.count()
    lock = threading.Lock()
    deadline = time.monotonic() + 60

    def consume(index: int) -> None:
        name = f"c{index}"
        with server.client(urls[index % len(urls)]) as client:
            while time.monotonic() < deadline:
                with lock:
                    if len(received) == len(priorities):
                        return
                answer = client.post(
                    "/api/v1/pull",
                    json={
                        "topic": "prio",
                        "consumer": name,
                        "max_messages": BATCH,
                        "wait_seconds": 0.5,
                    },
                )
                assert answer.status_code == 200, answer.text
                messages = answer.json()["messages"]
                with lock:
                    received.extend((next(arrivals), priority_of[m["id"]]) for m in messages)
                if messages:
                    acked = client.post(
                        "/api/v1/ack",
                        json={
                            "consumer": name,
                            "results": [{"id": m["id"], "status": "SUCCESS"} for m in messages],
                        },
                    )
                    assert acked.status_code == 200, acked.text

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(CONSUMERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=90)

    assert sorted(p for _, p in received) == sorted(priorities), "every message is delivered once"
    last_9 = max(n for n, p in received if p == 9)
    first_0 = min(n for n, p in received if p == 0)
    assert last_9 < first_0
