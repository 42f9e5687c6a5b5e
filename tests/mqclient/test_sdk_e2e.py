"""End to end: real broker processes on MariaDB, real consumer processes, the SDK in between.

Each test owns a topic; the session owns a dedicated database (see conftest.py / sdk_e2e.py).
"""

from __future__ import annotations

import signal
import time
from collections import Counter

import pytest

from mqclient import Producer
from tests.mqclient.sdk_e2e import (
    Cluster,
    Scenario,
    iter_trace,
    max_overlap,
    read_events,
    statuses,
    wait_until,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def _ended(scenario: Scenario) -> list[dict]:
    return [e for e in read_events(scenario.events) if e["event"] == "end"]


def _all_status(scenario: Scenario, status: str, count: int) -> bool:
    return statuses(scenario.admin.messages(scenario.topic)).get(status) == count


def test_three_groups_each_receive_every_broadcast_once(scenario: Scenario) -> None:
    groups = ["billing", "audit", "search"]
    for group in groups:
        scenario.consumer(f"consumer-{group}", groups=group, concurrency=4)
    wait_until(
        lambda: {c["group"] for c in scenario.admin.consumers(scenario.topic)} >= set(groups),
        30,
        "the three groups' consumers to register",
    )
    with scenario.producer() as producer:
        receipts = [producer.broadcast(scenario.topic, {"n": n}) for n in range(10)]
    assert [sorted(r.group for r in copies) for copies in receipts] == [sorted(groups)] * 10

    wait_until(lambda: _all_status(scenario, "SUCCESS", 30), 60, "30 copies to succeed")
    received = Counter((e["group"], e["data"]["n"]) for e in _ended(scenario))
    assert received == Counter({(g, n): 1 for g in groups for n in range(10)})
    assert {m["attempt"] for m in scenario.admin.messages(scenario.topic)} == {1}


def test_a_consumer_killed_mid_handler_has_its_messages_redelivered_and_succeed_once(
    scenario: Scenario,
) -> None:
    scenario.admin.create_topic(
        scenario.topic,
        retry_count=3,
        retry_strategy="fixed",
        retry_interval_seconds=1,
        timeout_seconds=2,
    )
    victim = scenario.consumer("victim", concurrency=4, sleep_first=120, timeout=300)
    with scenario.producer() as producer:
        ids = [producer.produce(scenario.topic, {"n": n}).id for n in range(4)]
    wait_until(lambda: len(read_events(scenario.events)) == 4, 30, "four handlers to start")
    victim.signal(signal.SIGKILL)
    victim.wait(10)

    scenario.consumer("survivor", concurrency=4)  # attempt 2 runs fast
    wait_until(lambda: _all_status(scenario, "SUCCESS", 4), 60, "redelivered messages to succeed")
    for message_id in ids:
        detail = scenario.admin.message(message_id)
        assert detail["attempt"] == 2
        assert len(list(iter_trace(detail, "acked"))) == 1
        assert len(list(iter_trace(detail, "lease_expired"))) == 1
    assert Counter(e["id"] for e in _ended(scenario)) == Counter(ids)


def test_sigterm_finishes_in_flight_handlers_and_releases_unstarted_messages_at_once(
    scenario: Scenario,
) -> None:
    scenario.admin.create_topic(scenario.topic, retry_count=2)
    with scenario.producer() as producer:
        ids = [producer.produce(scenario.topic, {"n": n}).id for n in range(5)]
    # Two slots and three prefetched: five messages leased, two handlers running.
    proc = scenario.consumer("graceful", concurrency=2, prefetch=3, sleep=4)
    wait_until(lambda: len(read_events(scenario.events)) == 2, 30, "two handlers to start")
    wait_until(lambda: _all_status(scenario, "RUNNING", 5), 10, "five messages leased")

    proc.signal(signal.SIGTERM)
    wait_until(lambda: _all_status(scenario, "NEW", 3), 2.0, "unstarted messages released")
    assert statuses(scenario.admin.messages(scenario.topic)).get("RUNNING") == 2
    assert proc.wait(30) == 0

    by_id = {m["id"]: m for m in scenario.admin.messages(scenario.topic)}
    started = {e["id"] for e in read_events(scenario.events)}
    assert {by_id[i]["status"] for i in started} == {"SUCCESS"}
    for message_id in set(ids) - started:
        message = by_id[message_id]
        assert (message["status"], message["attempt"], message["retry_remaining"]) == ("NEW", 0, 2)
        assert list(iter_trace(scenario.admin.message(message_id), "released"))
    wait_until(
        lambda: scenario.admin.consumers(scenario.topic) == [], 10, "the registry entry to go"
    )


def test_producers_and_consumers_carry_on_when_a_broker_process_dies(
    scenario: Scenario, e2e_cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = e2e_cluster.start_broker(), e2e_cluster.start_broker()
    scenario.brokers = [first.url, second.url]
    scenario.admin.create_topic(
        scenario.topic,
        retry_count=5,
        retry_strategy="fixed",
        retry_interval_seconds=1,
        timeout_seconds=5,
    )
    consumer = scenario.consumer("survivor", concurrency=4, sleep=0.01)
    producer = Producer(scenario.brokers, e2e_cluster.token, retry_deadline=60)
    produced: list[int] = []
    port_of_first = first.url.rsplit(":", 1)[1]
    for n in range(150):
        produced.append(producer.produce(scenario.topic, {"n": n}).id)
        if n == 50:
            first.process.signal(signal.SIGKILL)  # one dies while both serve traffic
        if n == 100:  # bring it back, then kill the other: every client fails over at least once
            first = e2e_cluster.start_broker(int(port_of_first))
            second.process.signal(signal.SIGKILL)
    producer.close()

    scenario.brokers = [first.url]
    assert len(set(produced)) == 150
    wait_until(lambda: _all_status(scenario, "SUCCESS", 150), 90, "all 150 messages to succeed")
    stored = scenario.admin.messages(scenario.topic)
    assert sorted(m["data"]["n"] for m in stored) == list(range(150))  # none lost, none doubled
    assert sorted(m["id"] for m in stored) == sorted(produced)
    # Both sides really lost their broker at least once and went on through the other.
    assert any("failed on POST /api/v1/messages" in r.getMessage() for r in caplog.records)
    assert "failed on POST /api/v1/" in consumer.output()


def test_a_consumer_told_of_one_broker_finds_the_others_in_the_registry(
    scenario: Scenario, e2e_cluster: Cluster
) -> None:
    only, other = e2e_cluster.start_broker(), e2e_cluster.start_broker()
    scenario.brokers = [other.url]
    # The consumer learns of `other` from its registration's answer: `other` must be listed
    # by then (a broker registers itself just after it starts answering).
    wait_until(lambda: {only.url, other.url} <= set(scenario.admin.brokers()), 20, "both brokers to register")
    proc = scenario.consumer("discovering", brokers=[only.url], concurrency=2)
    # Not just registered on the broker's side: the broker can store the registration and
    # be killed before its answer (which lists `other`) reaches the consumer. The consumer
    # logs the brokers it knows once it has that answer.
    wait_until(
        lambda: any(" started: " in line and other.url in line for line in proc.output().splitlines()),
        20, "the consumer to learn of the other broker",
    )
    only.process.signal(signal.SIGKILL)  # the only broker it was given is gone
    with scenario.producer() as producer:
        for n in range(20):
            producer.produce(scenario.topic, {"n": n})
    wait_until(
        lambda: _all_status(scenario, "SUCCESS", 20), 40, "messages to succeed via discovery"
    )
    assert proc.alive()


def test_a_handler_slower_than_its_lease_keeps_it_and_is_not_redelivered(
    scenario: Scenario,
) -> None:
    # timeout 1 s gives a 3 s lease (grace 2 s); the handler may run 30 s and takes 8 s.
    scenario.admin.create_topic(scenario.topic, retry_count=2, timeout_seconds=1)
    scenario.consumer("slow", concurrency=1, timeout=30, sleep=8)
    with scenario.producer() as producer:
        message_id = producer.produce(scenario.topic, {"slow": True}).id
    wait_until(lambda: _all_status(scenario, "SUCCESS", 1), 40, "the slow message to succeed")
    detail = scenario.admin.message(message_id)
    assert detail["attempt"] == 1
    assert not list(iter_trace(detail, "lease_expired"))
    assert [e["event"] for e in read_events(scenario.events)] == ["start", "end"]


def test_a_handler_past_its_timeout_is_failed_and_retried(scenario: Scenario) -> None:
    scenario.admin.create_topic(
        scenario.topic,
        retry_count=2,
        retry_strategy="fixed",
        retry_interval_seconds=1,
        timeout_seconds=1,
    )
    scenario.consumer("timeouts", concurrency=1, sleep_first=6, sleep=0)
    with scenario.producer() as producer:
        message_id = producer.produce(scenario.topic, {"n": 1}).id
    wait_until(lambda: _all_status(scenario, "SUCCESS", 1), 30, "the retry to succeed")
    # The retry waits for the timed-out attempt still running in this process: never two
    # attempts of one message at once.
    assert max_overlap(read_events(scenario.events)) == 1
    detail = scenario.admin.message(message_id)
    assert detail["attempt"] == 2
    nacks = list(iter_trace(detail, "nacked"))
    assert len(nacks) == 1 and nacks[0]["log"].startswith("timeout")
    assert list(iter_trace(detail, "retry_scheduled"))
    assert not list(iter_trace(detail, "lease_expired"))


def test_concurrency_8_runs_8_handlers_at_once(scenario: Scenario) -> None:
    with scenario.producer() as producer:
        producer.produce_many([{"topic": scenario.topic, "data": {"n": n}} for n in range(16)])
    scenario.consumer("wide", concurrency=8, sleep=2)
    wait_until(lambda: _all_status(scenario, "SUCCESS", 16), 40, "16 messages to succeed")
    assert max_overlap(read_events(scenario.events)) == 8


def test_reject_fails_a_message_for_good_and_a_string_return_is_logged(
    scenario: Scenario,
) -> None:
    scenario.admin.create_topic(scenario.topic, retry_count=3)
    scenario.consumer("rejecting", concurrency=2)
    with scenario.producer() as producer:
        rejected = producer.produce(scenario.topic, {"bad": True}, key="reject").id
        accepted = producer.produce(scenario.topic, {"good": True}, key="ok").id
    wait_until(lambda: _all_status(scenario, "FAIL", 1), 20, "the rejected message to fail")
    wait_until(lambda: _all_status(scenario, "SUCCESS", 1), 20, "the other to succeed")
    failed = scenario.admin.message(rejected)
    assert (failed["attempt"], failed["retry_remaining"]) == (1, 3)
    assert failed["last_log"] == "rejected: e2e says no"
    assert scenario.admin.message(accepted)["last_log"].startswith("done by ")


@pytest.mark.parametrize("websocket", ["0", "1"])
def test_a_snoozing_handler_gets_the_message_again_after_the_delay_without_spending_a_retry(
    scenario: Scenario, websocket: str
) -> None:
    scenario.admin.create_topic(scenario.topic, retry_count=0)
    scenario.consumer("snoozing", concurrency=2, MQ_WEBSOCKET=websocket)
    with scenario.producer() as producer:
        snoozed = producer.produce(scenario.topic, {"n": 1}, key="snooze").id
    wait_until(lambda: _all_status(scenario, "SUCCESS", 1), 30, "the snoozed message to succeed")
    message = scenario.admin.message(snoozed)
    assert (message["attempt"], message["retry_remaining"]) == (2, 0)
    starts = sorted(e["t"] for e in read_events(scenario.events) if e["event"] == "start")
    assert len(starts) == 2 and starts[1] - starts[0] >= 1.0
    assert next(e["log"] for e in iter_trace(message, "retry_scheduled")).startswith("snoozed until ")


def test_a_snooze_the_broker_refuses_is_acked_as_a_failure_without_losing_the_batch(
    scenario: Scenario,
) -> None:
    scenario.admin.create_topic(scenario.topic, retry_count=1, retry_strategy="fixed", retry_interval_seconds=0)
    scenario.consumer("oversnoozing", concurrency=4)
    with scenario.producer() as producer:
        too_long = producer.produce(scenario.topic, {"n": 1}, key="snooze-long").id
        plain = [producer.produce(scenario.topic, {"n": n}).id for n in range(3)]
    wait_until(lambda: _all_status(scenario, "SUCCESS", 4), 30, "every message to succeed")
    message = scenario.admin.message(too_long)
    assert (message["attempt"], message["retry_remaining"]) == (2, 0)
    nacked = [e["log"] for e in iter_trace(message, "nacked")]
    assert len(nacked) == 1 and nacked[0].startswith("snooze of 1e+07s refused: ")
    assert all(scenario.admin.message(i)["attempt"] == 1 for i in plain)


def test_websocket_mode_delivers_on_push_and_stops_without_waiting_for_a_poll(
    scenario: Scenario,
) -> None:
    # A 20 s poll: in long-poll mode a stop would wait for the outstanding poll to return.
    proc = scenario.consumer("pushed", concurrency=2, MQ_WEBSOCKET="1", MQ_WAIT_SECONDS="20")
    wait_until(lambda: "push wake-ups on" in proc.output(), 20, "the websocket subscription")
    time.sleep(1)  # idle now: the puller waits for a push, no HTTP request open
    started = time.monotonic()
    with scenario.producer() as producer:
        for n in range(3):
            producer.produce(scenario.topic, {"n": n})
    wait_until(lambda: _all_status(scenario, "SUCCESS", 3), 10, "pushed messages to succeed")
    assert time.monotonic() - started < 3  # the 20 s fallback never came into play

    stopping = time.monotonic()
    proc.signal(signal.SIGTERM)
    assert proc.wait(15) == 0
    assert time.monotonic() - stopping < 5
