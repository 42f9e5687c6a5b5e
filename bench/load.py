"""Load generators against a running broker: HTTP produce, HTTP pull+ack, SDK consumers.

Each returns a rate or a list of samples; figures.py decides what to run and how often.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx

from bench.common import (
    DB_PART,
    DB_PROCESS,
    KEY_ID,
    PYTHON,
    REDIS_URL,
    ROOT,
    BenchBroker,
    CpuMeter,
    db_connect,
    payload,
    pids_named,
    redis_client,
)
from bench.dblimit import INSERT_MESSAGE, analyze, message_row

THREADS = 4
BATCH = 100


def _client(broker: BenchBroker) -> httpx.Client:
    return httpx.Client(base_url=broker.url, headers=broker.headers(), timeout=60)


def _in_threads(count: int, work: Callable[[int], Any]) -> tuple[float, list[Any]]:
    """Run work(i) in `count` threads started together; returns (seconds, results)."""
    results: list[Any] = [None] * count
    errors: list[BaseException] = []
    gate = threading.Barrier(count + 1)

    def run(i: int) -> None:
        gate.wait()
        try:
            results[i] = work(i)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    gate.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - began, results


def produce_rate(broker: BenchBroker, topic: str, messages: int, threads: int = THREADS,
                 cpu: dict[str, float] | None = None) -> float:
    """Messages/s stored by `threads` clients posting batches of 100 (~200-byte messages).

    With `cpu`, also fills in where the CPU went: microseconds per message in the broker, the
    database and the producing clients (this process's threads)."""
    share = messages // threads

    def work(i: int) -> int:
        sent = 0
        with _client(broker) as client:
            while sent < share:
                n = min(BATCH, share - sent)
                body = {"messages": [{"topic": topic, "data": payload(sent + k)} for k in range(n)]}
                response = client.post("/api/v1/messages", json=body)
                if response.status_code != 201:
                    raise RuntimeError(f"produce answered {response.status_code}: {response.text[:300]}")
                sent += n
        return sent

    meter = CpuMeter({"broker": broker.pids, DB_PART: lambda: pids_named(DB_PROCESS), "producers": lambda: [os.getpid()]})
    seconds, counts = _in_threads(threads, work)
    if cpu is not None:
        cpu.update({part: used / sum(counts) * 1e6 for part, used in meter.used().items()})
    return sum(counts) / seconds


def sql_fill(broker: BenchBroker, topic: str, messages: int, group: str = "default", status: str = "NEW") -> None:
    """Put `messages` rows (NEW unless told) in the broker's table directly (fast preload for
    consume figures; produce is measured on its own). The topic must exist (produce one first)."""
    conn = db_connect(broker.database)
    try:  # closed even on an error: an open transaction would block dropping the database
        cur = conn.cursor()
        now = datetime.now(UTC).replace(tzinfo=None)
        for start in range(0, messages, 2000):
            rows = [message_row(json.dumps(payload(start + i)), status, now, now, topic, group)
                    for i in range(min(2000, messages - start))]
            cur.executemany(INSERT_MESSAGE, rows)
            conn.commit()
    finally:
        conn.close()
    analyze(broker.database)


#: Finished messages a table in service holds before a figure that inserts in bulk runs on it.
HISTORY = 5_000


def put_history(broker: BenchBroker, topic: str, messages: int = HISTORY) -> None:
    """Finished (SUCCESS) messages of `topic` in the broker's table, as a table a broker has
    been running on holds: nothing to claim, but its file is past the first megabyte. A new
    InnoDB table's file grows a few pages at a time up to 1 MB (~2,100 of these rows), then a
    megabyte at a time; on this machine a 500-row INSERT takes 13-21 ms in that first
    megabyte against 6-7 ms after it, so a long-poll burst (one produce of 1,000 rows)
    would answer its last pull ~20 ms later on a new table (`python -m bench longpoll`)."""
    sql_fill(broker, topic, messages, status="SUCCESS")


def ensure_topic(broker: BenchBroker, topic: str) -> None:
    """Create the topic (auto-created by a produce) and consume that first message."""
    with _client(broker) as client:
        client.post("/api/v1/messages", json={"messages": [{"topic": topic, "data": 0}]}).raise_for_status()
        got = client.post("/api/v1/pull", json={"topic": topic, "group": "default", "consumer": "bench-setup",
                                                "max_messages": 10, "wait_seconds": 0}).json()["messages"]
        if got:
            client.post("/api/v1/ack", json={"consumer": "bench-setup", "results": [
                {"id": m["id"], "status": "SUCCESS"} for m in got]}).raise_for_status()


def pull_ack_rate(broker: BenchBroker, topic: str, messages: int, threads: int = THREADS) -> float:
    """Messages/s claimed and acked over HTTP by `threads` consumers (pull 100, ack 100)."""
    sql_fill(broker, topic, messages)

    def work(i: int) -> int:
        done = 0
        consumer = f"bench-http-{i}"
        with _client(broker) as client:
            while True:
                got = client.post("/api/v1/pull", json={
                    "topic": topic, "group": "default", "consumer": consumer,
                    "max_messages": BATCH, "wait_seconds": 0}).json()["messages"]
                if not got:
                    return done
                client.post("/api/v1/ack", json={"consumer": consumer, "results": [
                    {"id": m["id"], "status": "SUCCESS"} for m in got]}).raise_for_status()
                done += len(got)

    seconds, counts = _in_threads(threads, work)
    if sum(counts) != messages:
        raise RuntimeError(f"pulled {sum(counts)} of {messages}")
    return messages / seconds


def pull_ack_latency(broker: BenchBroker, topic: str, samples: int) -> list[float]:
    """Seconds per (pull 1 + ack 1) by one consumer with a waiting backlog of `samples`."""
    sql_fill(broker, topic, samples)
    out: list[float] = []
    with _client(broker) as client:
        for _ in range(samples):
            began = time.perf_counter()
            got = client.post("/api/v1/pull", json={
                "topic": topic, "group": "default", "consumer": "bench-latency",
                "max_messages": 1, "wait_seconds": 0}).json()["messages"]
            client.post("/api/v1/ack", json={"consumer": "bench-latency", "results": [
                {"id": m["id"], "status": "SUCCESS"} for m in got]}).raise_for_status()
            out.append(time.perf_counter() - began)
            if not got:
                raise RuntimeError("the backlog ran dry")
    return out


# --- SDK consumer processes --------------------------------------------------------------


class SdkConsumers:
    """`python -m mqclient run bench.workloads.sdk_consumer` processes."""

    def __init__(self, broker: BenchBroker, topic: str, processes: int, mode: str = "noop",
                 concurrency: int = 4, prefetch: int = 96, group: str = "default") -> None:
        self.env = {**os.environ, "MQ_BROKERS": broker.url, "MQ_TOKEN": broker.token, "BENCH_GROUP": group,
                    "MQ_LOG_LEVEL": "WARNING", "MQ_LOG_FORMAT": "text",
                    "BENCH_TOPIC": topic, "BENCH_MODE": mode, "BENCH_REDIS_URL": REDIS_URL,
                    "BENCH_CONCURRENCY": str(concurrency), "BENCH_PREFETCH": str(prefetch),
                    "MQ_WAIT_SECONDS": "10"}
        self.count = processes
        self.procs: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> SdkConsumers:
        log = open(ROOT / "var" / "bench-sdk-consumers.log", "ab")
        for _ in range(self.count):
            self.procs.append(subprocess.Popen(
                [PYTHON, "-m", "mqclient", "run", "bench.workloads.sdk_consumer"],
                cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT))
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def drain_rate(count: Callable[[], int], messages: int, timeout: float = 1800,
               first: tuple[float, int] | None = None) -> float:
    """Messages/s between the first handled message and the last: worker start-up is not
    counted, for MQ Center and for every peer alike. `first` is a caller's own sighting of
    the first handled messages (perf_counter, count), made before work of its own."""
    deadline = time.monotonic() + timeout
    first_at, first_count = first if first else (None, 0)
    while time.monotonic() < deadline:
        done = count()
        now = time.perf_counter()
        if first_at is None and done > 0:
            first_at, first_count = now, done
        if done >= messages:
            if first_at is None or now - first_at <= 0 or done <= first_count:
                raise RuntimeError("everything finished between two polls: use more messages")
            return (done - first_count) / (now - first_at)
        time.sleep(0.02)
    raise RuntimeError(f"only {count()} of {messages} handled in {timeout}s")


def redis_counter(key: str) -> Callable[[], int]:
    client = redis_client()
    client.delete(key)
    return lambda: int(client.get(key) or 0)


def sdk_e2e_rate(broker: BenchBroker, topic: str, messages: int, processes: int = 4,
                 cpu: dict[str, float] | None = None) -> float:
    """Drain a backlog of `messages` with SDK consumer processes running no-op handlers.

    With `cpu`, also fills in where the CPU went: microseconds per message in the broker,
    the SDK consumer processes, MariaDB and Redis, from the first handled message on.
    """
    sql_fill(broker, topic, messages)
    counter = redis_counter(f"bench:{KEY_ID}done:{topic}")
    with SdkConsumers(broker, topic, processes) as consumers:
        if cpu is None:
            return drain_rate(counter, messages)
        parts: dict[str, Callable[[], list[int]]] = {
            "broker": broker.pids, "sdk consumers": lambda: [p.pid for p in consumers.procs],
            DB_PART: lambda: pids_named(DB_PROCESS), "redis": lambda: pids_named("redis-server")}
        deadline = time.monotonic() + 120
        while (started_at := counter()) == 0 and time.monotonic() < deadline:
            time.sleep(0.005)
        seen_at = time.perf_counter()
        meter = CpuMeter(parts)  # reads /proc: a toy backlog may be drained meanwhile
        rate = drain_rate(counter, messages, first=(seen_at, started_at))
        handled = max(1, counter() - started_at)
        cpu.update({part: used / handled * 1e6 for part, used in meter.used().items()})
        return rate


def fanout_e2e_rate(broker: BenchBroker, topic: str, groups: list[str], messages: int) -> float:
    """Copies/s delivered: `messages` published (through the API, so each group gets its
    copy) and drained by two SDK consumer processes per group."""
    produce_rate(broker, topic, messages)
    counter = redis_counter(f"bench:{KEY_ID}done:{topic}")
    with contextlib.ExitStack() as stack:
        for group in groups:
            stack.enter_context(SdkConsumers(broker, topic, 2, group=group))
        return drain_rate(counter, messages * len(groups))


def sdk_latency(broker: BenchBroker, topic: str, samples: int, gap: float = 0.02) -> list[float]:
    """Produce call start → handler start, one message at a time, to one idle consumer."""
    from mqclient import Producer

    key = f"bench:{KEY_ID}latency:{topic}"
    client = redis_client()
    client.delete(key)
    with SdkConsumers(broker, topic, 1, mode="latency", concurrency=1, prefetch=0), \
            Producer(brokers=[broker.url], token=broker.token) as producer:
        deadline = time.monotonic() + 60
        while client.llen(key) == 0:  # warm up: the consumer is registered and polling
            if time.monotonic() > deadline:
                raise RuntimeError("the SDK consumer never handled a message")
            producer.produce(topic, {"t0": time.time()})
            time.sleep(0.3)
        time.sleep(0.5)
        client.delete(key)
        for _ in range(samples):
            time.sleep(gap)
            producer.produce(topic, {"t0": time.time()})
            wait_until = time.monotonic() + 10
            while client.llen(key) < _ + 1 and time.monotonic() < wait_until:
                time.sleep(0.001)
        return [float(v) for v in client.lrange(key, 0, -1)]
