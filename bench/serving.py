"""How to serve the broker: the same produce and pull+ack load under each server setup.

For every entry of SERVINGS: produce throughput (4 threads, batches of 100), HTTP pull+ack
throughput (4 consumers, pull 100 + ack 100), a minimal endpoint (GET /healthz, 4 threads)
and broker RSS. For the WSGI (gthread) setups, also what a waiting long-poll costs: with as
many pulls waiting as the server has threads, how long a produce call takes.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx

from bench import load
from bench.common import SERVINGS, BenchBroker, Results, Scale, summary


def healthz_rate(broker: BenchBroker, seconds: float, threads: int = 4) -> float:
    stop = time.perf_counter() + seconds

    def work(i: int) -> int:
        done = 0
        with httpx.Client(base_url=broker.url, timeout=30) as client:
            while time.perf_counter() < stop:
                client.get("/healthz").raise_for_status()
                done += 1
        return done

    elapsed, counts = load._in_threads(threads, work)
    return sum(counts) / elapsed


def produce_while_polls_wait(broker: BenchBroker, waiting: int, wait_seconds: int = 8) -> float:
    """Seconds one produce call takes while `waiting` long-polls hold the server's threads."""
    def pull(i: int) -> None:
        with httpx.Client(base_url=broker.url, headers=broker.headers(), timeout=60) as client:
            client.post("/api/v1/pull", json={"topic": "idle", "group": "default", "consumer": f"w{i}",
                                              "max_messages": 1, "wait_seconds": wait_seconds})

    threads = [threading.Thread(target=pull, args=(i,)) for i in range(waiting)]
    for thread in threads:
        thread.start()
    time.sleep(1.5)
    began = time.perf_counter()
    with httpx.Client(base_url=broker.url, headers=broker.headers(), timeout=60) as client:
        client.post("/api/v1/messages", json={"messages": [{"topic": "other", "data": 1}]}).raise_for_status()
    elapsed = time.perf_counter() - began
    for thread in threads:
        thread.join()
    return elapsed


def serving(scale: Scale, results: Results, names: list[str] | None = None) -> None:
    table: dict[str, Any] = {}
    for name in names or list(SERVINGS):
        broker = BenchBroker("bench_serving", serving=name)
        broker.setup()
        broker.start()
        try:
            load.ensure_topic(broker, "bench")
            load.ensure_topic(broker, "idle")
            produce, pull_ack = [], []
            for _ in range(scale.repeats):
                broker.truncate()
                produce.append(load.produce_rate(broker, "bench", scale.serving_messages))
                broker.truncate()
                pull_ack.append(load.pull_ack_rate(broker, "bench", scale.serving_messages))
            row: dict[str, Any] = {
                "label": broker.serving.label,
                "produce": summary(produce),
                "pull_ack": summary(pull_ack),
                "healthz": summary(healthz_rate(broker, scale.serving_seconds) for _ in range(scale.repeats)),
                "rss_mb": broker.rss_mb(),
            }
            if broker.serving.kind == "gunicorn-gthread":
                threads = broker.serving.threads * broker.serving.workers
                row["produce_s_with_threads_held_by_polls"] = produce_while_polls_wait(broker, threads)
                row["produce_s_with_half_threads_held"] = produce_while_polls_wait(broker, threads // 2)
            table[name] = row
            print(f"  {name}: {row}", flush=True)
        finally:
            broker.teardown()
    results.put("serving", table)
