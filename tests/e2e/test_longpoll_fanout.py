"""Many pulls waiting on one group: a batch wakes them without a thundering herd or a
serial chain, and no message goes to two of them."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tests.support.server import BrokerServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

WAITERS = 30


def test_it_serves_every_waiting_pull_from_one_batch_within_a_fallback_interval() -> None:
    server = BrokerServer("fanout").setup()
    try:
        url = server.start()
        answers: list[dict[str, Any]] = []
        lock = threading.Lock()

        def wait(n: int) -> None:
            with server.client(url) as client:
                response = client.post("/api/v1/pull", json={
                    "topic": "fan", "consumer": f"w{n}", "max_messages": 1, "wait_seconds": 20})
                with lock:
                    answers.append({"at": time.monotonic(), "messages": response.json()["messages"]})

        threads = [threading.Thread(target=wait, args=(n,)) for n in range(WAITERS)]
        for thread in threads:
            thread.start()
        wait_until(lambda: server.waiting_pulls() >= WAITERS, what="every pull to wait")
        with server.client(url) as client:
            sent = time.monotonic()
            response = client.post("/api/v1/messages", json={"messages": [
                {"topic": "fan", "data": n} for n in range(WAITERS)]})
            assert response.status_code == 201
        for thread in threads:
            thread.join(timeout=30)

        delivered = [m["data"] for a in answers for m in a["messages"]]
        slowest = max(a["at"] for a in answers) - sent
        assert sorted(delivered) == list(range(WAITERS)), "a message was lost or delivered twice"
        # Well inside the 5 s fallback poll: wake-ups reached every waiter.
        assert slowest < 3.0, f"the last waiter was served after {slowest:.2f}s"
        print(f"\nlong-poll fan-out: {WAITERS} waiters served, slowest {slowest * 1000:.0f} ms after the produce")
    finally:
        server.teardown()
