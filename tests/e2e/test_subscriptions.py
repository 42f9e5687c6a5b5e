"""Subscriptions through two real broker processes: fan-out with a group created mid-stream,
flow control held across both brokers under 8 consumers, and a killed consumer's message
redelivered with a topic's default retries."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.server import ROOT, BrokerServer
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def brokers() -> Iterator[tuple[BrokerServer, list[str]]]:
    server = BrokerServer("subs", extra_env={"MQ_LEASE_GRACE_SECONDS": "1"}).setup()
    try:
        yield server, [server.start(), server.start()]
    finally:
        server.teardown()


def create_group(client: httpx.Client, topic: str, group: str, **settings: Any) -> dict[str, Any]:
    made = client.post("/api/v1/topics", json={"topic": topic})
    assert made.status_code in (201, 409), made.text
    response = client.post(f"/api/v1/topics/{topic}/groups", json={"group": group, **settings})
    assert response.status_code == 201, response.text
    return response.json()


def publish(client: httpx.Client, topic: str, values: range, **fields: Any) -> None:
    response = client.post("/api/v1/messages", json={"messages": [{"topic": topic, "data": n, **fields} for n in values]})
    assert response.status_code == 201, response.text


def drain(server: BrokerServer, urls: list[str], topic: str, group: str, want: int, *,
          consumers: int = 2, hold: float = 0.0, max_messages: int = 20) -> dict[str, Any]:
    """Consume `want` messages of a group with consumers alternating between the brokers.
    Returns the data received (in order), the delivery times, and the peaks of messages held
    at once, overall and per key. A message counts as held from its pull's answer until its
    ack is sent (before the broker frees it, so the peak never overstates the broker's)."""
    received: list[Any] = []
    times: list[float] = []
    held: Counter[Any] = Counter()
    peaks: Counter[Any] = Counter()
    lock = threading.Lock()

    def run(index: int) -> None:
        clients = [server.client(url) for url in urls]
        deadline = time.monotonic() + 120
        turn = index
        while time.monotonic() < deadline:
            with lock:
                if len(received) >= want:
                    return
            client = clients[turn % len(clients)]
            turn += 1
            answer = client.post("/api/v1/pull", json={
                "topic": topic, "group": group, "consumer": f"{group}-c{index}",
                "max_messages": max_messages, "wait_seconds": 1,
            })
            assert answer.status_code == 200, answer.text
            messages = answer.json()["messages"]
            with lock:
                for m in messages:
                    received.append(m["data"])
                    times.append(time.monotonic())
                    for scope in ("all", m["key"]):
                        held[scope] += 1
                        peaks[scope] = max(peaks[scope], held[scope])
            if messages:
                time.sleep(hold)  # the work each message takes
                with lock:
                    for m in messages:
                        held["all"] -= 1
                        held[m["key"]] -= 1
                done = client.post("/api/v1/ack", json={
                    "consumer": f"{group}-c{index}", "results": [{"id": m["id"], "status": "SUCCESS"} for m in messages],
                })
                assert done.status_code == 200, done.text

    threads = [threading.Thread(target=run, args=(i,)) for i in range(consumers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=150)
    return {"received": received, "times": times, "peaks": peaks}


def test_every_group_gets_every_publish_once_and_a_group_created_mid_stream_gets_history_and_stream(brokers):
    server, urls = brokers
    admin = server.client(urls[0])
    response = admin.post("/api/v1/topics", json={"topic": "news", "groups": [{"group": "a"}, {"group": "b"}]})
    assert response.status_code == 201, response.text
    total = 600
    created = threading.Event()

    def producer() -> None:
        clients = [server.client(url) for url in urls]
        for start in range(0, total, 10):
            publish(clients[start // 10 % 2], "news", range(start, start + 10))
            if start == 200:
                # Mid-stream, through the other broker: replays the 210 publishes so far.
                create_group(clients[1], "news", "c", start="earliest")
                created.set()

    thread = threading.Thread(target=producer)
    thread.start()
    results = {group: drain(server, urls, "news", group, total) for group in ("a", "b")}
    thread.join(timeout=120)
    assert created.is_set()
    results["c"] = drain(server, urls, "news", "c", total)
    for group, result in results.items():
        counts = Counter(result["received"])
        assert set(counts) == set(range(total)), (group, sorted(set(range(total)) - set(counts))[:10])
        assert max(counts.values()) == 1, (group, [v for v, n in counts.items() if n > 1][:10])
    # Nothing else waits: no copy was stored twice.
    assert server.sql("SELECT group_name, COUNT(*) FROM mq_message WHERE topic = 'news' GROUP BY group_name "
                      "ORDER BY group_name") == [("a", total), ("b", total), ("c", total)]
    replayed = server.sql("SELECT COUNT(*) FROM mq_message WHERE topic='news' AND group_name='c' "
                          "AND JSON_EXTRACT(headers, '$.\"mq-replay-of\"') IS NOT NULL")[0][0]
    assert replayed >= 210

    # A deleted group stops receiving; the others go on.
    assert admin.delete("/api/v1/topics/news/groups/b").status_code == 204
    publish(admin, "news", range(total, total + 5))
    assert server.sql("SELECT COUNT(*) FROM mq_message WHERE topic='news' AND group_name='b' AND status='NEW'") == [(0,)]
    assert server.sql("SELECT COUNT(*) FROM mq_message WHERE topic='news' AND group_name='a' AND status='NEW'") == [(5,)]


def test_a_paused_group_resumes_a_waiting_pull(brokers):
    server, urls = brokers
    admin = server.client(urls[0])
    create_group(admin, "pausing", "g", paused=True)
    publish(admin, "pausing", range(3))
    answer: dict[str, Any] = {}

    def wait_pull() -> None:
        answer["response"] = server.client(urls[1]).post("/api/v1/pull", json={
            "topic": "pausing", "group": "g", "consumer": "w", "max_messages": 10, "wait_seconds": 20})
        answer["at"] = time.monotonic()

    thread = threading.Thread(target=wait_pull)
    thread.start()
    wait_until(lambda: server.waiting_pulls() >= 1, what="the pull to wait")
    assert "response" not in answer  # paused: it waits, empty-handed
    resumed_at = time.monotonic()
    assert admin.patch("/api/v1/topics/pausing/groups/g", json={"paused": False}).status_code == 200
    thread.join(timeout=30)
    assert [m["data"] for m in answer["response"].json()["messages"]] == [0, 1, 2]
    # Woken by the resume (the topic cache of the other broker lives 1 s), not by the wait's end.
    assert answer["at"] - resumed_at < 10


def test_max_in_flight_and_rate_hold_across_two_brokers_under_eight_consumers(brokers):
    server, urls = brokers
    admin = server.client(urls[0])
    create_group(admin, "limited", "capped", max_in_flight=3)
    create_group(admin, "limited", "paced", rate_per_second=20)
    publish(admin, "limited", range(120))
    capped = drain(server, urls, "limited", "capped", 120, consumers=8, hold=0.02, max_messages=5)
    assert sorted(capped["received"]) == list(range(120))
    assert capped["peaks"]["all"] <= 3  # held at once, counted by the consumers themselves
    assert capped["peaks"]["all"] == 3  # and the cap is reached, so it is what limits

    paced = drain(server, urls, "limited", "paced", 120, consumers=8, max_messages=5)
    assert sorted(paced["received"]) == list(range(120))
    # A bucket of 2 tokens refilled at 20/s: n deliveries take at least (n - 2) / 20 s. The
    # stated tolerance is one pull's batch (5): never more than bucket + rate x t + 5.
    times = sorted(paced["times"])
    for n, at in enumerate(times, start=1):
        assert n <= 2 + 20 * (at - times[0]) + 5, (n, at - times[0])


def test_key_concurrency_two_never_runs_three_of_one_key(brokers):
    server, urls = brokers
    admin = server.client(urls[0])
    create_group(admin, "keyed", "g", mode="sharded", key_concurrency=2)
    response = admin.post("/api/v1/messages", json={"messages": [
        {"topic": "keyed", "data": n, "key": f"k{n % 3}"} for n in range(90)]})
    assert response.status_code == 201, response.text
    result = drain(server, urls, "keyed", "g", 90, consumers=8, hold=0.02, max_messages=4)
    assert sorted(result["received"]) == list(range(90))
    assert max(result["peaks"][f"k{i}"] for i in range(3)) == 2


CONSUMER = """
import sys, time, httpx
url, token = sys.argv[1], sys.argv[2]
client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
while True:
    got = client.post("/api/v1/pull", json={"topic": "jobs", "group": "workers", "consumer": "doomed",
                                            "max_messages": 1, "wait_seconds": 5}).json()["messages"]
    if got:
        print(got[0]["id"], flush=True)
        time.sleep(3600)  # mid-message when it is killed
"""


def test_a_consumer_killed_mid_message_gets_it_redelivered_with_default_settings(brokers):
    server, urls = brokers
    admin = server.client(urls[0])
    # Default retries (3, exponential from 10 s); a short execution timeout so the lease ends soon.
    assert admin.post("/api/v1/topics", json={"topic": "jobs", "timeout_seconds": 1,
                                              "groups": [{"group": "workers"}]}).status_code == 201
    publish(admin, "jobs", range(1))
    doomed = subprocess.Popen([sys.executable, "-c", CONSUMER, urls[1], server.token], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)
    message_id = int(doomed.stdout.readline())  # type: ignore[union-attr]
    doomed.send_signal(signal.SIGKILL)
    doomed.wait(timeout=10)

    wait_until(lambda: server.sql("SELECT status, retry_remaining FROM mq_message WHERE id = %s", message_id)
               == [("NEW", 2)], timeout=20, what="the expired lease to schedule a retry")
    result = drain(server, urls, "jobs", "workers", 1, consumers=1)  # waits out the 10 s retry delay
    assert result["received"] == [0]
    assert server.sql("SELECT status, attempt FROM mq_message WHERE id = %s", message_id) == [("SUCCESS", 2)]
    events = [e for (e,) in server.sql("SELECT event FROM mq_message_trace WHERE message_id = %s ORDER BY id", message_id)]
    assert events.count("acked") == 1 and "lease_expired" in events
