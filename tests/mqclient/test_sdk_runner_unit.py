"""The runner's own bookkeeping (slots, ack batching, extension, timeouts, release), driven
in-process against the fake broker. The same behaviours are verified end to end against the
real server, with real processes, in test_sdk_e2e_consumer.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

from mqclient import ClientConfig, Message, Reject
from mqclient.consumer import ConsumerSpec
from mqclient.runner import Runner
from tests.mqclient.sdk_fakebroker import FakeBroker, FakeQueue


@contextmanager
def running(broker: FakeBroker, spec: ConsumerSpec, **config: object) -> Iterator[Runner]:
    settings = {"wait_seconds": 1, "grace_seconds": 10.0, **config}
    runner = Runner([spec], config=ClientConfig(brokers=[broker.url], **settings))  # type: ignore[arg-type]
    thread = threading.Thread(target=runner.run, kwargs={"install_signals": False})
    thread.start()
    try:
        yield runner
    finally:
        runner.stop()
        thread.join(30)
        assert not thread.is_alive()


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def statuses(queue: FakeQueue) -> list[str]:
    return [m["status"] for m in queue.messages.values()]


def test_it_runs_concurrency_handlers_at_once_and_batches_acks(
    fake_queue: FakeQueue, queue_broker: FakeBroker
) -> None:
    active = 0
    peak = 0
    lock = threading.Lock()

    def handler(message: Message) -> None:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        time.sleep(0.3)
        with lock:
            active -= 1

    for i in range(16):
        fake_queue.add("t", i)
    with running(queue_broker, ConsumerSpec("t", handler, concurrency=8)):
        wait_for(lambda: statuses(fake_queue).count("SUCCESS") == 16)
    assert peak == 8
    assert queue_broker.paths().count("/api/v1/ack") < 16
    pulls = [r.body for r in queue_broker.requests if r.path == "/api/v1/pull"]
    assert max(p["max_messages"] for p in pulls) <= 8


def test_acks_ride_on_the_next_pull_and_each_result_is_acked_once(
    fake_queue: FakeQueue, queue_broker: FakeBroker
) -> None:
    fake_queue.pulls_ack = True
    for i in range(40):
        fake_queue.add("t", i)
    with running(queue_broker, ConsumerSpec("t", lambda m: None, concurrency=2, prefetch=2)):
        wait_for(lambda: statuses(fake_queue).count("SUCCESS") == 40)
    carried = [r.body for r in queue_broker.requests if r.path == "/api/v1/pull" and r.body.get("results")]
    assert carried, "no pull carried acks"
    assert all(p["wait_seconds"] == 0 for p in carried)  # its outcomes come back at once
    assert sum(len(p["results"]) for p in carried) > 20  # most of the 40 results
    assert [len(m["acks"]) for m in fake_queue.messages.values()] == [1] * 40


def test_a_broker_that_ignores_carried_acks_gets_them_on_their_own(
    fake_queue: FakeQueue, queue_broker: FakeBroker
) -> None:
    assert not fake_queue.pulls_ack  # as a broker without the extension
    for i in range(20):
        fake_queue.add("t", i)
    spec = ConsumerSpec("t", lambda m: None, concurrency=2, prefetch=2)
    with running(queue_broker, spec) as runner:
        wait_for(lambda: statuses(fake_queue).count("SUCCESS") == 20)
        assert not runner.acker.pulls_carry
    carried = [r.body for r in queue_broker.requests if r.path == "/api/v1/pull" and r.body.get("results")]
    assert len(carried) == 1  # the first, ignored: after it, acks go on their own
    assert [len(m["acks"]) for m in fake_queue.messages.values()] == [1] * 20


def test_a_reject_is_acked_as_fail_without_retry(
    fake_queue: FakeQueue, queue_broker: FakeBroker
) -> None:
    def handler(message: Message) -> None:
        raise Reject("bad payload")

    mid = fake_queue.add("t", 1)
    with running(queue_broker, ConsumerSpec("t", handler)):
        wait_for(lambda: fake_queue.messages[mid]["acks"] != [])
    assert fake_queue.messages[mid]["acks"][0] == {
        "id": mid,
        "status": "FAIL",
        "log": "rejected: bad payload",
        "retry": False,
    }


def test_a_handler_past_its_timeout_is_failed_and_its_slot_reused(
    fake_queue: FakeQueue, queue_broker: FakeBroker
) -> None:
    def handler(message: Message) -> None:
        if message.data == "slow":
            time.sleep(3)

    slow = fake_queue.add("t", "slow")
    fast = fake_queue.add("t", "fast")
    with running(queue_broker, ConsumerSpec("t", handler, concurrency=1, timeout=0.5)):
        wait_for(lambda: fake_queue.messages[fast]["status"] == "SUCCESS", timeout=2.5)
    ack = fake_queue.messages[slow]["acks"]
    assert len(ack) == 1 and ack[0]["status"] == "FAIL" and ack[0]["log"].startswith("timeout")


def test_a_handler_longer_than_its_lease_gets_the_lease_extended(
    fake_queue: FakeQueue, queue_broker: FakeBroker
) -> None:
    def handler(message: Message) -> None:
        time.sleep(3)

    mid = fake_queue.add("t", 1, timeout_seconds=1)
    with running(queue_broker, ConsumerSpec("t", handler, timeout=10)):
        wait_for(lambda: fake_queue.messages[mid]["status"] == "SUCCESS", timeout=6)
    assert queue_broker.paths().count("/api/v1/extend") >= 1
    assert fake_queue.messages[mid]["attempt"] == 1
    assert fake_queue.messages[mid]["acks"][0]["status"] == "SUCCESS"


def test_stop_releases_prefetched_messages_and_lets_running_ones_finish(
    fake_queue: FakeQueue, queue_broker: FakeBroker
) -> None:
    started = threading.Event()

    def handler(message: Message) -> None:
        started.set()
        time.sleep(1)

    for i in range(4):
        fake_queue.add("t", i)
    with running(queue_broker, ConsumerSpec("t", handler, concurrency=1, prefetch=3)) as runner:
        wait_for(lambda: statuses(fake_queue).count("RUNNING") == 4)
        started.wait(5)
        runner.stop()
        # released at once, while the running handler is still busy
        wait_for(lambda: statuses(fake_queue).count("NEW") == 3, timeout=0.8)
    assert statuses(fake_queue).count("SUCCESS") == 1
    assert sorted(m.get("released", 0) for m in fake_queue.messages.values()) == [0, 1, 1, 1]
    assert queue_broker.paths()[-1].startswith("/api/v1/registry/consumers/")


def test_a_busy_subscription_pulls_again_once_three_quarters_of_its_buffer_are_free(
    fake_queue: FakeQueue, queue_broker: FakeBroker
) -> None:
    # concurrency 1 + prefetch 15 = a buffer of 16: the next pull waits for 12 free places
    # (not one pull per finished handler), and goes out while 3 are still ready to run.
    gate = threading.Semaphore(0)

    def handler(message: Message) -> None:
        gate.acquire()

    for i in range(40):
        fake_queue.add("t", i)
    with running(queue_broker, ConsumerSpec("t", handler, concurrency=1, prefetch=15)):
        wait_for(lambda: statuses(fake_queue).count("RUNNING") == 16)
        for finished in range(1, 12):  # 11 finished: 11 of 16 free, no pull yet
            gate.release()
            wait_for(lambda n=finished: statuses(fake_queue).count("SUCCESS") == n)
        time.sleep(0.3)
        assert _pulls_asking(queue_broker) == [16]
        gate.release()  # the twelfth: one pull for twelve
        wait_for(lambda: len(_pulls_asking(queue_broker)) == 2)
        assert _pulls_asking(queue_broker)[1] == 12
        wait_for(lambda: statuses(fake_queue).count("SUCCESS") == 12)
        for _ in range(40):
            gate.release()
        wait_for(lambda: statuses(fake_queue).count("SUCCESS") == 40)


def _pulls_asking(broker: FakeBroker) -> list[int]:
    return [r.body["max_messages"] for r in broker.requests if r.path == "/api/v1/pull" and r.body]


def test_a_redelivery_waits_for_its_timed_out_attempt_still_running_in_this_process(
    fake_queue: FakeQueue, queue_broker: FakeBroker
) -> None:
    first_may_end = threading.Event()
    calls: list[tuple[int, str]] = []
    lock = threading.Lock()

    def handler(message: Message) -> None:
        with lock:
            calls.append((message.attempt, "start"))
        if message.attempt == 1:
            first_may_end.wait(20)
        with lock:
            calls.append((message.attempt, "end"))

    mid = fake_queue.add("t", "x")
    with running(queue_broker, ConsumerSpec("t", handler, concurrency=2, timeout=0.3)):
        wait_for(lambda: len(fake_queue.messages[mid]["acks"]) == 1)  # attempt 1 failed for its timeout
        with fake_queue.lock:  # the broker redelivers it, as its retry policy would
            fake_queue.messages[mid]["status"] = "NEW"
            fake_queue.lock.notify_all()
        wait_for(lambda: fake_queue.messages[mid]["attempt"] == 2)  # pulled again by this process
        # Attempt 2 is held while attempt 1's thread runs, whatever the free slots.
        with suppress(AssertionError):
            wait_for(lambda: len(calls) > 1, timeout=1.5)
        assert calls == [(1, "start")]
        first_may_end.set()
        wait_for(lambda: fake_queue.messages[mid]["status"] == "SUCCESS")
    assert calls == [(1, "start"), (1, "end"), (2, "start"), (2, "end")]
