"""How to serve the broker: the same produce and pull+ack load under each server setup.

For every entry of SERVINGS: produce throughput (4 threads, batches of 100), HTTP pull+ack
throughput (4 consumers, pull 100 + ack 100), a minimal endpoint (GET /healthz, 4 threads)
and broker RSS.
"""

from __future__ import annotations

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
            table[name] = row
            print(f"  {name}: {row}", flush=True)
        finally:
            broker.teardown()
    results.put("serving", table)
