"""Faults with the real SDK: a broker killed under produce load, and consumer storms."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from mqclient import Producer
from tests.support.server import ROOT, BrokerServer

pytestmark = [pytest.mark.e2e]

STORM_SECONDS = float(os.environ.get("MQ_STORM_SECONDS", "120"))


def start_consumer(server: BrokerServer, urls: list[str], topic: str, events: Path, **env: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "mqclient", "run", "tests.mqclient.sdk_e2e_consumers",
         "--brokers", ",".join(urls), "--token", server.token, "--wait-seconds", "2", "--grace", "5",
         "--log-level", "WARNING"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "E2E_TOPIC": topic, "E2E_EVENTS": str(events), "E2E_CONCURRENCY": "4", **env},
    )


def handled(events: Path) -> Counter[int]:
    if not events.exists():
        return Counter()
    return Counter(
        json.loads(line)["id"] for line in events.read_text().splitlines() if '"start"' in line
    )


def wait_all_succeeded(server: BrokerServer, topic: str, expected: int, timeout: float) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    statuses: dict[str, int] = {}
    while time.monotonic() < deadline:
        statuses = dict(server.sql("SELECT status, COUNT(*) FROM mq_message WHERE topic = %s GROUP BY status", topic))
        if statuses.get("SUCCESS", 0) >= expected:
            break
        time.sleep(0.5)
    return statuses


@pytest.mark.timeout(300)
def test_it_stores_every_acknowledged_produce_once_when_the_broker_is_killed_under_load(tmp_path: Path) -> None:
    server = BrokerServer("sdkkill", extra_env={"MQ_LEASE_GRACE_SECONDS": "1"}).setup()
    try:
        url = server.start()
        port = int(url.rsplit(":", 1)[1])
        acknowledged: list[int] = []
        errors: list[BaseException] = []
        lock = threading.Lock()

        def produce(worker: int) -> None:
            try:
                with Producer(brokers=[url], token=server.token, retry_deadline=60) as producer:
                    for batch in range(15):
                        stored = producer.produce_many(
                            [{"topic": "killed", "data": {"w": worker, "b": batch, "n": n}, "timeout": 5, "retry_count": 5}
                             for n in range(40)]
                        )
                        with lock:
                            acknowledged.extend(m.id for m in stored)
                        time.sleep(0.1)
            except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
                errors.append(exc)

        producers = [threading.Thread(target=produce, args=(w,)) for w in range(4)]
        for thread in producers:
            thread.start()
        # Kill once a quarter of the load is acknowledged: mid-load however fast produce is.
        deadline = time.monotonic() + 30
        while len(acknowledged) < 4 * 15 * 40 // 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        server.kill(url, signal.SIGKILL)
        killed_with = len(acknowledged)
        time.sleep(1.5)
        server.start(port)
        for thread in producers:
            thread.join(timeout=120)

        events = tmp_path / "events.jsonl"
        consumers = [start_consumer(server, [url], "killed", events) for _ in range(2)]
        try:
            statuses = wait_all_succeeded(server, "killed", len(acknowledged), timeout=120)
        finally:
            for proc in consumers:
                proc.terminate()
            for proc in consumers:
                proc.wait(timeout=30)

        assert errors == []
        assert 0 < killed_with < 4 * 15 * 40, "the kill did not land mid-load"
        assert len(acknowledged) == 4 * 15 * 40
        assert len(set(acknowledged)) == len(acknowledged)
        stored = server.sql("SELECT COUNT(*), COUNT(DISTINCT dedup_key) FROM mq_message WHERE topic = 'killed'")[0]
        assert stored == (len(acknowledged), len(acknowledged)), "a message was lost or stored twice"
        assert statuses == {"SUCCESS": len(acknowledged)}
        assert set(handled(events)) == set(acknowledged)
        print(f"\nbroker killed: acknowledged={len(acknowledged)} stored={stored[0]} consumed={statuses['SUCCESS']} lost=0")
    finally:
        server.teardown()


@pytest.mark.timeout(STORM_SECONDS + 240)
def test_it_succeeds_every_message_exactly_once_through_a_consumer_storm(tmp_path: Path) -> None:
    server = BrokerServer("storm", extra_env={"MQ_LEASE_GRACE_SECONDS": "1"}).setup()
    try:
        urls = [server.start(), server.start()]
        total = 3000
        with Producer(brokers=urls, token=server.token) as producer:
            for start in range(0, total, 500):
                producer.produce_many(
                    [{"topic": "storm", "data": n, "timeout": 3, "retry_count": 50} for n in range(start, start + 500)]
                )
        events = tmp_path / "events.jsonl"
        slow = {"E2E_SLEEP": "0.15"}  # so work is in flight whenever a consumer is killed
        consumers = [start_consumer(server, urls, "storm", events, **slow) for _ in range(4)]
        kills = 0
        rng = random.Random(7)
        deadline = time.monotonic() + STORM_SECONDS
        try:
            while time.monotonic() < deadline:
                time.sleep(rng.uniform(2, 6))
                victim = consumers.pop(rng.randrange(len(consumers)))
                victim.send_signal(signal.SIGKILL)
                victim.wait(timeout=10)
                kills += 1
                consumers.append(start_consumer(server, urls, "storm", events, **slow))
            statuses = wait_all_succeeded(server, "storm", total, timeout=180)
        finally:
            for proc in consumers:
                proc.terminate()
            for proc in consumers:
                proc.wait(timeout=30)

        runs = handled(events)
        ids = {row[0] for row in server.sql("SELECT id FROM mq_message WHERE topic = 'storm'")}
        acked_twice = server.sql(
            "SELECT message_id FROM mq_message_trace t JOIN mq_message m ON m.id = t.message_id "
            "WHERE m.topic = 'storm' AND t.event = 'acked' GROUP BY message_id HAVING COUNT(*) > 1"
        )
        assert kills >= 5
        assert statuses == {"SUCCESS": total}
        assert set(runs) == ids, "a handler never ran for some message"
        assert acked_twice == [], "a message reached SUCCESS twice"
        redelivered = sum(n - 1 for n in runs.values())
        print(f"\nconsumer storm: {kills} consumers killed in {STORM_SECONDS:.0f}s; messages={total} "
              f"succeeded={statuses['SUCCESS']} handler runs={sum(runs.values())} (redelivered {redelivered}) lost=0")
    finally:
        server.teardown()


