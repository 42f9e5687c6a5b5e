"""Transport: failover, retry/backoff, typed errors. Against the in-process fake broker."""

from __future__ import annotations

import time
from typing import Any

import pytest

from mqclient.errors import BrokerUnavailable, Forbidden, InvalidRequest
from mqclient.transport import Transport
from tests.mqclient.sdk_fakebroker import FakeBroker, Reply, free_port


def _ok(method: str, path: str, body: Any) -> tuple[int, Any]:
    return 200, {"echo": body}


def test_it_fails_over_to_the_next_broker_when_one_refuses_connections() -> None:
    live = FakeBroker(_ok)
    dead = f"http://127.0.0.1:{free_port()}"
    try:
        transport = Transport([dead, live.url], backoff_base=0.01)
        for _ in range(5):
            assert transport.call("POST", "/x", json={"n": 1}) == {"echo": {"n": 1}}
        # the dead broker is benched: only the first call (at most) went there
        assert len(live.requests) == 5
    finally:
        live.stop()


def test_it_retries_503_honouring_retry_after_then_succeeds() -> None:
    answers: list[Reply] = [
        (503, {"error": {"code": "unavailable", "message": "db down"}}, {"Retry-After": "0.2"}),
        (201, {"ok": True}),
    ]
    broker = FakeBroker(lambda m, p, b: answers.pop(0))
    try:
        started = time.monotonic()
        assert Transport([broker.url]).call("POST", "/x", json={}) == {"ok": True}
        assert time.monotonic() - started >= 0.2
        assert len(broker.requests) == 2
    finally:
        broker.stop()


def test_it_raises_a_typed_error_with_the_api_code_and_does_not_retry_a_4xx() -> None:
    body = {
        "error": {
            "code": "invalid_request",
            "message": "bad data",
            "details": {"field": "messages[3].data"},
        }
    }
    broker = FakeBroker(lambda m, p, b: (400, body))
    try:
        with pytest.raises(InvalidRequest) as caught:
            Transport([broker.url]).call("POST", "/x", json={})
        assert caught.value.code == "invalid_request"
        assert caught.value.message == "bad data"
        assert caught.value.field == "messages[3].data"
        assert len(broker.requests) == 1
    finally:
        broker.stop()


def test_it_maps_403_to_forbidden() -> None:
    broker = FakeBroker(lambda m, p, b: (403, {"error": {"code": "forbidden", "message": "no"}}))
    try:
        with pytest.raises(Forbidden):
            Transport([broker.url]).call("GET", "/x")
    finally:
        broker.stop()


def test_it_gives_up_with_broker_unavailable_when_the_deadline_passes() -> None:
    transport = Transport(
        [f"http://127.0.0.1:{free_port()}"], retry_deadline=0.5, backoff_base=0.05
    )
    started = time.monotonic()
    with pytest.raises(BrokerUnavailable):
        transport.call("POST", "/x", json={})
    assert time.monotonic() - started < 3


def test_it_sends_the_bearer_token() -> None:
    broker = FakeBroker(_ok)
    try:
        Transport([broker.url], "s3cret").call("GET", "/x")
        assert broker.requests[0].headers["Authorization"] == "Bearer s3cret"
    finally:
        broker.stop()


def test_it_adopts_the_registry_broker_list_and_keeps_the_seeds() -> None:
    transport = Transport(["http://a:1"])
    transport.update_brokers(["http://b:2/", "http://c:3"])
    assert transport.brokers == ["http://b:2", "http://c:3", "http://a:1"]
    transport.update_brokers([])
    assert transport.brokers == ["http://b:2", "http://c:3", "http://a:1"]
