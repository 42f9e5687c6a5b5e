"""Backpressure against a real broker process, through the SDK: the producer retries 429
backlog_full honouring Retry-After, gets through once the group drains, and raises
BacklogFull (nothing stored) when it does not drain before the deadline."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from mqclient import BacklogFull, BatchingProducer, Producer
from tests.support.server import BrokerServer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def broker() -> Iterator[tuple[BrokerServer, str]]:
    server = BrokerServer("backlog", extra_env={"MQ_BACKLOG_RETRY_AFTER_SECONDS": "1"}).setup()
    try:
        url = server.start()
        with server.client(url) as admin:
            response = admin.post("/api/v1/topics", json={"topic": "bp", "max_backlog": 3})
            assert response.status_code == 201, response.text
        yield server, url
    finally:
        server.teardown()


class Refusals(logging.Handler):
    """Counts the SDK transport's warnings about backlog_full answers."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "backlog_full" in record.getMessage():
            self.count += 1


def stored(server: BrokerServer) -> int:
    return server.sql("SELECT COUNT(*) FROM mq_message WHERE topic = 'bp' AND status = 'NEW'")[0][0]


def drain(server: BrokerServer, url: str) -> None:
    with server.client(url) as client:
        while True:
            got = client.post(
                "/api/v1/pull", json={"topic": "bp", "consumer": "d", "max_messages": 10}
            ).json()
            if not got["messages"]:
                return
            client.post(
                "/api/v1/ack",
                json={
                    "consumer": "d",
                    "results": [{"id": m["id"], "status": "SUCCESS"} for m in got["messages"]],
                },
            )


def test_the_producer_raises_backlog_full_after_its_deadline_and_nothing_is_stored(
    broker: Any,
) -> None:
    server, url = broker
    drain(server, url)
    with Producer(brokers=[url], token=server.token, retry_deadline=2.5) as producer:
        producer.produce_many([{"topic": "bp", "data": n} for n in range(3)])
        started = time.monotonic()
        with pytest.raises(BacklogFull) as raised:
            producer.produce_many([{"topic": "bp", "data": n} for n in range(2)])
        waited = time.monotonic() - started
    assert raised.value.status == 429 and raised.value.details["max_backlog"] == 3
    assert 1.5 <= waited < 6, "it retried (Retry-After 1 s) until the deadline, then raised"
    assert stored(server) == 3


def test_the_producer_gets_through_once_a_consumer_drains_the_group(broker: Any) -> None:
    server, url = broker
    drain(server, url)
    with Producer(brokers=[url], token=server.token, retry_deadline=30) as producer:
        producer.produce_many([{"topic": "bp", "data": n} for n in range(3)])
        result: dict[str, Any] = {}

        def produce_one() -> None:
            result["receipt"] = producer.produce("bp", "waited")

        refused = Refusals()
        logging.getLogger("mqclient.transport").addHandler(refused)
        try:
            thread = threading.Thread(target=produce_one)
            thread.start()
            wait_until(
                lambda: refused.count >= 1, timeout=10, what="the broker to refuse the produce"
            )
            assert "receipt" not in result
            drain(server, url)
            thread.join(timeout=20)
        finally:
            logging.getLogger("mqclient.transport").removeHandler(refused)
    assert result["receipt"].id
    assert (
        server.sql("SELECT data FROM mq_message WHERE id = %s", result["receipt"].id)[0][0]
        == '"waited"'
    )


def test_the_batching_producer_fails_the_batchs_futures_with_backlog_full(broker: Any) -> None:
    server, url = broker
    drain(server, url)
    with Producer(brokers=[url], token=server.token) as producer:
        producer.produce_many([{"topic": "bp", "data": n} for n in range(3)])
    with BatchingProducer(brokers=[url], token=server.token, delivery_deadline=1.5) as batching:
        futures = [batching.submit("bp", n) for n in range(4)]
        errors = [f.exception(timeout=20) for f in futures]
    assert all(isinstance(e, BacklogFull) for e in errors), errors
    assert stored(server) == 3
