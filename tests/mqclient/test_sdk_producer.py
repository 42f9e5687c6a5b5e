"""Producer and batching producer: dedup keys on retries, typed errors, futures, back-pressure.
Against the in-process fake broker (the real server is exercised by test_sdk_e2e_*.py)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from mqclient import BatchingProducer, BrokerUnavailable, BufferFull, InvalidRequest, Producer
from mqclient.outgoing import build_message
from mqclient.receipts import AnswerMismatch, receipts
from tests.mqclient.sdk_fakebroker import FakeBroker, free_port


class Store:
    """Answers produce calls like the broker: ids in order, dedup keys honoured."""

    def __init__(self) -> None:
        self.by_key: dict[str, int] = {}
        self.next_id = 100
        self.calls = 0
        self.fail_first: list[tuple[int, Any]] = []

    def __call__(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        self.calls += 1
        out = []
        for item in body["messages"]:
            if item.get("data") == "invalid":
                index = body["messages"].index(item)
                return 400, {
                    "error": {
                        "code": "invalid_request",
                        "message": "bad",
                        "details": {"field": f"messages[{index}].data"},
                    }
                }
        for item in body["messages"]:
            key = item.get("dedup_key")
            duplicate = key in self.by_key
            if not duplicate:
                self.by_key[key] = self.next_id
                self.next_id += 1
            out.append(
                {
                    "id": self.by_key[key],
                    "topic": item["topic"],
                    "group": item.get("group", "default"),
                    "status": "NEW",
                    "duplicate": duplicate,
                }
            )
        if self.fail_first:  # the broker committed but the answer is lost
            return self.fail_first.pop(0)
        return 201, {"messages": out}


def test_a_retried_produce_reuses_its_dedup_key_and_stores_one_message() -> None:
    store = Store()
    store.fail_first = [(503, {"error": {"code": "unavailable", "message": "x"}})]
    broker = FakeBroker(store)
    try:
        receipt = Producer([broker.url], "t").produce("orders", {"n": 1})
        keys = [r.body["messages"][0]["dedup_key"] for r in broker.requests]
        assert len(keys) == 2 and keys[0] == keys[1] and keys[0].startswith("sdk-")
        assert receipt.id == 100
        assert receipt.duplicate is False  # our own first attempt, not someone else's message
        assert len(store.by_key) == 1
    finally:
        broker.stop()


def test_a_callers_dedup_key_is_sent_and_a_duplicate_is_reported() -> None:
    broker = FakeBroker(Store())
    try:
        producer = Producer([broker.url])
        first = producer.produce("orders", 1, dedup_key="order-42")
        again = producer.produce("orders", 1, dedup_key="order-42")
        assert (first.id, first.duplicate) == (again.id, False)
        assert again.duplicate is True
    finally:
        broker.stop()


def test_it_fails_over_to_a_live_broker_when_the_first_is_down() -> None:
    broker = FakeBroker(Store())
    try:
        producer = Producer([f"http://127.0.0.1:{free_port()}", broker.url])
        assert [producer.produce("t", i).id for i in range(3)] == [100, 101, 102]
    finally:
        broker.stop()


def test_a_permanent_error_raises_with_code_and_field() -> None:
    broker = FakeBroker(Store())
    try:
        with pytest.raises(InvalidRequest) as caught:
            Producer([broker.url]).produce_many(
                [{"topic": "t", "data": 1}, {"topic": "t", "data": "invalid"}]
            )
        assert caught.value.field == "messages[1].data"
    finally:
        broker.stop()


def test_it_sends_only_the_fields_that_were_set() -> None:
    out = build_message(
        "t",
        {"a": 1},
        key="k",
        delay=timedelta(seconds=1.2),
        retry_count=2,
        timeout=30,
        headers={"trace": "x"},
    )
    assert out.body == {
        "topic": "t",
        "data": {"a": 1},
        "key": "k",
        "delay_seconds": 2,
        "retry_count": 2,
        "timeout_seconds": 30,
        "headers": {"trace": "x"},
        "dedup_key": out.dedup_key,
    }
    when = datetime(2030, 1, 1, tzinfo=UTC)
    assert build_message("t", 1, delay=when).body["effect_time"] == when.isoformat()
    assert "dedup_key" not in build_message("t", 1, auto_dedup=False).body
    with pytest.raises(ValueError):
        build_message("t", 1, group="g", broadcast=True)


def test_batching_resolves_every_future_in_few_calls() -> None:
    store = Store()
    broker = FakeBroker(store)
    try:
        with BatchingProducer([broker.url], linger=0.05, max_batch=100) as producer:
            futures = [producer.submit("t", i, dedup_key=f"k{i}") for i in range(250)]
            receipts = [f.result(timeout=10) for f in futures]
        # each future got its own message's receipt, whatever order the batches landed in
        assert [r.dedup_key for r in receipts] == [f"k{i}" for i in range(250)]
        assert [store.by_key[f"k{i}"] for i in range(250)] == [r.id for r in receipts]
        assert 3 <= store.calls <= 10
    finally:
        broker.stop()


def test_batching_fails_only_the_invalid_message_of_a_batch() -> None:
    broker = FakeBroker(Store())
    seen: list[tuple[Any, Any]] = []
    try:
        with BatchingProducer([broker.url], linger=0.05) as producer:
            good = producer.submit("t", 1)
            bad = producer.submit("t", "invalid", callback=lambda r, e: seen.append((r, e)))
            other = producer.submit("t", 2)
            assert good.result(timeout=5).id and other.result(timeout=5).id
            with pytest.raises(InvalidRequest):
                bad.result(timeout=5)
        assert seen and seen[0][0] is None and isinstance(seen[0][1], InvalidRequest)
    finally:
        broker.stop()


def test_batching_applies_back_pressure_and_never_drops() -> None:
    gate = threading.Event()
    store = Store()

    def slow(method: str, path: str, body: Any) -> tuple[int, Any]:
        gate.wait(10)
        return store(method, path, body)

    broker = FakeBroker(slow)
    try:
        producer = BatchingProducer(
            [broker.url], max_batch=2, max_buffer=4, senders=1, block_timeout=0.3, linger=0
        )
        accepted = [producer.submit("t", i) for i in range(4)]
        with pytest.raises(BufferFull):
            producer.submit("t", 99)
        gate.set()
        assert len({f.result(timeout=10).id for f in accepted}) == 4
        producer.close()
    finally:
        broker.stop()


def test_batching_reports_an_outage_on_each_future() -> None:
    producer = BatchingProducer([f"http://127.0.0.1:{free_port()}"], delivery_deadline=0.3)
    future = producer.submit("t", 1)
    with pytest.raises(BrokerUnavailable):
        future.result(timeout=10)
    producer.close()


def _entries(*pairs: tuple[str, str]) -> dict[str, Any]:
    return {"messages": [{"id": n, "topic": t, "group": g} for n, (t, g) in enumerate(pairs, 1)]}


def test_it_maps_each_publishs_copies_back_to_its_item() -> None:
    sent = [
        build_message("orders", 1),  # publish: billing, audit
        build_message("orders", 2, group="audit"),
        build_message("stock", 3),  # publish: default
        build_message("orders", 4),
    ]
    answer = _entries(
        ("orders", "billing"),
        ("orders", "audit"),
        ("orders", "audit"),
        ("stock", "default"),
        ("orders", "billing"),
        ("orders", "audit"),
    )
    found = receipts(answer, sent)
    assert [(r.ids, r.groups) for r in found] == [
        ([1, 2], ["billing", "audit"]),
        ([3], ["audit"]),
        ([4], ["default"]),
        ([5, 6], ["billing", "audit"]),
    ]
    assert (found[0].id, found[1].id) == (1, 3)


@pytest.mark.parametrize(
    "answer",
    [
        _entries(("orders", "billing"), ("orders", "audit"), ("orders", "x")),  # 3 copies for 2
        _entries(("orders", "billing")),  # fewer entries than messages
        _entries(("orders", "billing"), ("other", "billing")),  # a topic not sent
    ],
)
def test_it_refuses_an_answer_that_does_not_match_what_was_sent(answer: dict[str, Any]) -> None:
    with pytest.raises(AnswerMismatch):
        receipts(answer, [build_message("orders", 1), build_message("orders", 2)])
