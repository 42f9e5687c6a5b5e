"""Request/reply through a real broker process with the SDK: `Producer.request` waits on its
own reply group and returns the reply a handler sent with `message.reply`; no reply within
the timeout raises TimeoutError, and a late reply to it does not answer the next request."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from mqclient import Message, Producer
from tests.support.server import BrokerServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def broker() -> Iterator[tuple[BrokerServer, str]]:
    server = BrokerServer("reqreply").setup()
    try:
        yield server, server.start()
    finally:
        server.teardown()


def serve(server: BrokerServer, url: str, stop: threading.Event, answer: Any, skip: set[int]) -> None:
    """A replier: pulls `rpc` (group `svc`), replies `answer(data)` unless the data is in
    `skip` (then later, once the next request came), and acks."""
    held: list[Message] = []
    with Producer(brokers=[url], token=server.token) as producer:
        while not stop.is_set():
            got = producer.transport.call("POST", "/api/v1/pull", json={
                "topic": "rpc", "group": "svc", "consumer": "svc-1", "max_messages": 10, "wait_seconds": 1})
            messages = [Message.from_api(item, transport=producer.transport) for item in got.get("messages", [])]
            for message in messages:
                if message.data in skip:
                    held.append(message)
                    continue
                for late in held:  # the skipped request's reply comes after its requester gave up
                    late.reply({"late": late.data})
                held.clear()
                message.reply(answer(message.data))
            if messages:
                producer.transport.call("POST", "/api/v1/ack", json={
                    "consumer": "svc-1", "results": [{"id": m.id, "status": "SUCCESS"} for m in messages]})


def test_request_returns_the_reply_and_times_out_without_one(broker: Any) -> None:
    server, url = broker
    stop = threading.Event()
    replier = threading.Thread(target=serve, args=(server, url, stop, lambda n: {"double": n * 2}, {99}))
    replier.start()
    try:
        with Producer(brokers=[url], token=server.token) as client:
            reply = client.request("rpc", 21, timeout=30, group="svc")
            assert reply.data == {"double": 42} and reply.topic == "rpc.reply"
            assert reply.group == client.reply_group and reply.correlation_id
            with pytest.raises(TimeoutError):
                client.request("rpc", 99, timeout=2, group="svc")
            assert client.request("rpc", 5, timeout=30, group="svc").data == {"double": 10}
            # Another client's requests get their own replies only.
            with Producer(brokers=[url], token=server.token) as other:
                assert other.request("rpc", 1, timeout=30, group="svc").data == {"double": 2}
                assert other.reply_group != client.reply_group
    finally:
        stop.set()
        replier.join(timeout=30)


def test_concurrent_requests_on_one_producer_each_get_their_own_reply(broker: Any) -> None:
    """Eight threads share one Producer (one reply group): every call returns the reply to
    its own request, none is taken and dropped by another call."""
    server, url = broker
    stop = threading.Event()
    replier = threading.Thread(target=serve, args=(server, url, stop, lambda n: {"echo": n}, set()))
    replier.start()
    try:
        with Producer(brokers=[url], token=server.token) as client, ThreadPoolExecutor(8) as pool:
            for _round in range(3):
                calls = {n: pool.submit(client.request, "rpc", n, timeout=30, group="svc") for n in range(8)}
                assert {n: call.result().data for n, call in calls.items()} == {n: {"echo": n} for n in range(8)}
    finally:
        stop.set()
        replier.join(timeout=30)
