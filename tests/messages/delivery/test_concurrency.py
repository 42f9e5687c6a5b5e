"""Concurrency of the claim path with real parallel MariaDB connections (one per thread)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from messages.delivery.acks import AckResult, messages_ack
from messages.delivery.claims import messages_claim
from messages.delivery.lifecycle import leases_recover
from messages.delivery.produce import ProduceItem, messages_produce
from messages.models import Message, MessageTrace, Status
from messages.selectors import message_trace
from mqcenter.core.auth import Principal
from topics.models import DeliveryMode, Topic, TopicGroup

pytestmark = pytest.mark.django_db(transaction=True)

BROKER = Principal(name="test", scopes=("admin",), biz_ids=None)


def produce(topic: str, count: int, *, key: Callable[[int], str | None] = lambda i: None, group: str = "default") -> list[int]:
    ids: list[int] = []
    for start in range(0, count, 1000):
        items = [
            ProduceItem(topic=topic, data=f'{{"n":{i}}}', group=group, key=key(i))
            for i in range(start, min(count, start + 1000))
        ]
        ids += [r.id for r in messages_produce(principal=BROKER, items=items)]
    return ids


def run_threads(count: int, target: Callable[[int], None]) -> None:
    errors: list[BaseException] = []

    def wrapped(index: int) -> None:
        try:
            target(index)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=wrapped, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a consumer thread hung"
    assert not errors, errors


def drain(topic: str, consumers: int, batch: int, on_claim: Callable[[str, list[Message]], None] | None = None,
          expected: int = 0, group: str = "default") -> Counter[int]:
    """Consumers claim and ack until every message of the topic is SUCCESS."""
    delivered: Counter[int] = Counter()
    lock = threading.Lock()
    done = threading.Event()

    def consume(index: int) -> None:
        name = f"consumer-{index}"
        deadline = time.monotonic() + 90
        while not done.is_set() and time.monotonic() < deadline:
            claimed, _ = messages_claim(principal=BROKER, topic=topic, group=group, consumer=name, max_messages=batch)
            if not claimed:
                if not Message.objects.filter(topic=topic, status__in=[Status.NEW, Status.RUNNING]).exists():
                    done.set()
                time.sleep(0.005)
                continue
            with lock:
                delivered.update(m.id for m in claimed)
            if on_claim:
                on_claim(name, claimed)
            outcomes = messages_ack(
                principal=BROKER, consumer=name,
                results=[AckResult(id=m.id, status="SUCCESS") for m in claimed],
            )
            assert {o["outcome"] for o in outcomes} == {"success"}, outcomes

    run_threads(consumers, consume)
    return delivered


def test_it_never_delivers_a_message_to_two_of_eight_concurrent_claimers() -> None:
    ids = produce("load", 5000)

    delivered = drain("load", consumers=8, batch=50)

    assert sorted(delivered) == sorted(ids)
    assert max(delivered.values()) == 1, "a message was delivered twice"
    assert Message.objects.filter(topic="load", status=Status.SUCCESS).count() == 5000


def test_it_keeps_a_serial_group_to_one_message_at_a_time_in_id_order() -> None:
    topic = Topic.objects.create(name="ledger")
    TopicGroup.objects.create(topic=topic, name="default", mode=DeliveryMode.SERIAL)
    ids = produce("ledger", 120)
    order: list[int] = []
    in_flight = {"now": 0, "max": 0}
    lock = threading.Lock()

    def on_claim(consumer: str, claimed: list[Message]) -> None:
        assert len(claimed) == 1
        with lock:
            in_flight["now"] += 1
            in_flight["max"] = max(in_flight["max"], in_flight["now"])
            order.append(claimed[0].id)
        time.sleep(0.001)  # give the others a chance to (wrongly) claim meanwhile
        with lock:
            in_flight["now"] -= 1

    drain("ledger", consumers=4, batch=10, on_claim=on_claim)

    assert order == ids
    assert in_flight["max"] == 1


def test_it_orders_each_key_and_runs_different_keys_in_parallel_when_sharded() -> None:
    topic = Topic.objects.create(name="accounts")
    TopicGroup.objects.create(topic=topic, name="default", mode=DeliveryMode.SHARDED)
    keys = [f"k{i}" for i in range(8)]
    ids = produce("accounts", 400, key=lambda i: keys[i % len(keys)])
    key_of = dict(Message.objects.filter(id__in=ids).values_list("id", "key"))
    order: dict[str, list[int]] = {k: [] for k in keys}
    running: Counter[str] = Counter()
    overlap = {"same_key": 0, "parallel_keys": 0}
    lock = threading.Lock()

    def on_claim(consumer: str, claimed: list[Message]) -> None:
        with lock:
            batch_keys = Counter(m.key for m in claimed)
            if any(n > 1 for n in batch_keys.values()):
                overlap["same_key"] += 1
            for m in claimed:
                if running[m.key]:
                    overlap["same_key"] += 1
                running[m.key] += 1
                order[m.key].append(m.id)
            if len(+running) > 1:
                overlap["parallel_keys"] += 1
        time.sleep(0.002)
        with lock:
            for m in claimed:
                running[m.key] -= 1

    drain("accounts", consumers=4, batch=5, on_claim=on_claim)

    for key in keys:
        assert order[key] == sorted(i for i in ids if key_of[i] == key), f"key {key} out of order"
    assert overlap["same_key"] == 0, "two messages of one key ran at once"
    assert overlap["parallel_keys"] > 0, "different keys never ran in parallel"


def test_it_stores_one_message_when_two_produces_with_one_dedup_key_race() -> None:
    for round_ in range(10):
        barrier = threading.Barrier(2)
        answers: list[Any] = []

        def send(_: int, round_: int = round_) -> None:
            barrier.wait()
            result = messages_produce(
                principal=BROKER,
                items=[ProduceItem(topic="payments", data="1", dedup_key=f"pay-{round_}")],
            )
            answers.append(result[0])

        run_threads(2, send)
        assert answers[0].id == answers[1].id
        assert sorted(a.duplicate for a in answers) == [False, True]
    assert Message.objects.filter(topic="payments").count() == 10


def lease_ends(*ids: int) -> None:
    """The leases of these messages run out: moved into the past rather than waited for."""
    Message.objects.filter(id__in=ids).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def test_it_takes_an_unacked_message_back_after_its_lease_and_answers_the_late_ack_stale() -> None:
    Topic.objects.create(name="jobs", retry_count=1, retry_interval_seconds=0)
    [message_id] = produce("jobs", 1)

    first, _ = messages_claim(principal=BROKER, topic="jobs", group="default", consumer="slow", max_messages=1)
    assert [m.id for m in first] == [message_id]
    lease_ends(message_id)
    assert leases_recover() == 1
    second, _ = messages_claim(principal=BROKER, topic="jobs", group="default", consumer="fast", max_messages=1)

    assert [m.id for m in second] == [message_id]
    assert second[0].attempt == 2
    late = messages_ack(principal=BROKER, consumer="slow", results=[AckResult(id=message_id, status="SUCCESS")])
    assert late == [{"id": message_id, "outcome": "stale"}]
    assert Message.objects.get(id=message_id).status == Status.RUNNING
    ok = messages_ack(principal=BROKER, consumer="fast", results=[AckResult(id=message_id, status="SUCCESS")])
    assert ok == [{"id": message_id, "outcome": "success"}]
    trace = message_trace(Message.objects.get(id=message_id))
    assert [(e.event, e.actor, e.attempt) for e in trace if e.event != "produced"] == [
        ("pulled", "slow", 1), ("lease_expired", "broker", 1),
        ("pulled", "fast", 2), ("stale_ack", "slow", 2), ("acked", "fast", 2),
    ]
    # "produced" and fast's pull are the message row itself; slow's pull was written out as
    # a trace row when fast's claim took the message (and its row's pull) over.
    assert list(MessageTrace.objects.filter(message_id=message_id).order_by("id").values_list("event", "actor")) == [
        ("lease_expired", "broker"), ("pulled", "slow"), ("stale_ack", "slow"), ("acked", "fast"),
    ]


def test_it_makes_an_expired_message_a_timeout_dead_letter_when_no_retry_is_left() -> None:
    Topic.objects.create(name="once", retry_count=0)
    [message_id] = produce("once", 1)
    messages_claim(principal=BROKER, topic="once", group="default", consumer="gone", max_messages=1)
    lease_ends(message_id)
    assert leases_recover() == 1

    claimed, _ = messages_claim(principal=BROKER, topic="once", group="default", consumer="next", max_messages=1)

    assert claimed == []
    assert Message.objects.get(id=message_id).status == Status.TIMEOUT
