"""max_backlog under producers racing on two real broker processes: a group ends exactly at
its cap (never over), whether the topic rejects (429) or dead-letters the oldest to make room."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.server import BrokerServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

PRODUCERS = 12  # six on each broker
BATCHES = 8
BATCH = 10
CAP = 100


@pytest.fixture(scope="module")
def brokers() -> Iterator[tuple[BrokerServer, list[str]]]:
    server = BrokerServer("backlograce").setup()
    try:
        yield server, [server.start(), server.start()]
    finally:
        server.teardown()


def race(server: BrokerServer, urls: list[str], topic: str) -> Counter[int]:
    """Every producer sends its batches (publishes to the topic's one group) as fast as it
    can; returns the answers' status codes."""
    codes: Counter[int] = Counter()
    lock = threading.Lock()
    start = threading.Barrier(PRODUCERS)

    def run(index: int) -> None:
        with server.client(urls[index % 2]) as client:
            start.wait()
            for batch in range(BATCHES):
                response = client.post("/api/v1/messages", json={"messages": [
                    {"topic": topic, "data": [index, batch, n]} for n in range(BATCH)]})
                assert response.status_code in (201, 429), response.text
                with lock:
                    codes[response.status_code] += 1

    threads = [threading.Thread(target=run, args=(i,)) for i in range(PRODUCERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return codes


def statuses(server: BrokerServer, topic: str) -> dict[str, int]:
    return dict(server.sql("SELECT status, COUNT(*) FROM mq_message WHERE topic = %s GROUP BY status", topic))


@pytest.mark.parametrize("overflow", ["reject", "dead_letter_oldest"])
def test_racing_producers_on_two_brokers_end_exactly_at_the_cap(brokers: Any, overflow: str) -> None:
    server, urls = brokers
    topic = f"race-{overflow}"
    with server.client(urls[0]) as admin:
        response = admin.post("/api/v1/topics", json={"topic": topic, "max_backlog": CAP, "overflow": overflow,
                                                      "groups": [{"group": "g"}]})
        assert response.status_code == 201, response.text
    codes = race(server, urls, topic)
    found = statuses(server, topic)
    assert found["NEW"] == CAP
    if overflow == "reject":
        assert codes[201] * BATCH == CAP and codes[429] == PRODUCERS * BATCHES - CAP // BATCH
        assert set(found) == {"NEW"}
    else:
        assert codes == {201: PRODUCERS * BATCHES}
        assert found["EXPIRED"] == PRODUCERS * BATCHES * BATCH - CAP
        logs = server.sql("SELECT DISTINCT last_log FROM mq_message WHERE topic = %s AND status = 'EXPIRED'", topic)
        assert logs == (("overflow",),) or list(logs) == [("overflow",)]
