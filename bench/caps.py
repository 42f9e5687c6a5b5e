"""What an exact `max_backlog` costs a produce: the same load on a topic without a cap and on
one with a cap it never reaches (every produce locks the group row and counts its backlog).

    .venv/bin/python -m bench.caps [--messages 20000] [--repeats 3] [--calls 300]

One broker process (the default serving). Throughput: 4 client threads posting batches of 100
(~200-byte messages) to one group. Latency: one client posting one message per call,
`--calls` calls to the emptied group, p50 and p99. The two topics' runs alternate, so the machine's drift hits
both alike. Its own database (`mq_e2e_caps_<MQ_BENCH_ID>`).
"""

from __future__ import annotations

import argparse
import json
import os
import time

from bench import load
from bench.common import BenchBroker, payload, summary

TOPICS = {"uncapped": None, "capped": 10_000_000}


def _latencies(broker: BenchBroker, topic: str, calls: int) -> dict[str, float]:
    samples = []
    with load._client(broker) as client:
        for n in range(calls):
            started = time.perf_counter()
            response = client.post("/api/v1/messages", json={"messages": [{"topic": topic, "data": payload(n)}]})
            samples.append((time.perf_counter() - started) * 1000)
            if response.status_code != 201:
                raise RuntimeError(f"produce answered {response.status_code}: {response.text[:300]}")
    samples.sort()
    return {"p50_ms": samples[len(samples) // 2], "p99_ms": samples[int(len(samples) * 0.99) - 1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    broker = BenchBroker("caps")  # named after MQ_BENCH_ID by BenchBroker
    broker.setup()
    broker.start()
    try:
        with load._client(broker) as client:
            for topic, cap in TOPICS.items():
                client.post("/api/v1/topics", json={"topic": topic, "max_backlog": cap}).raise_for_status()
        rates: dict[str, list[float]] = {topic: [] for topic in TOPICS}
        latency: dict[str, list[dict[str, float]]] = {topic: [] for topic in TOPICS}
        for _ in range(args.repeats):
            for topic in TOPICS:
                broker.truncate()
                rates[topic].append(load.produce_rate(broker, topic, args.messages))
                broker.truncate()  # the one-message calls on an empty group: the lock's cost, not the count's
                latency[topic].append(_latencies(broker, topic, args.calls))
        print(json.dumps({
            "messages": args.messages, "repeats": args.repeats, "calls": args.calls, "load": os.getloadavg(),
            "messages_per_s": {topic: summary(values) for topic, values in rates.items()},
            "one_message_call_ms": {topic: {"p50": summary(r["p50_ms"] for r in runs),
                                            "p99": summary(r["p99_ms"] for r in runs)}
                                    for topic, runs in latency.items()},
        }, indent=2))
    finally:
        broker.teardown()


if __name__ == "__main__":
    main()
