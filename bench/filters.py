"""Subscription filters: what a publish costs with 20 filtered groups against 20 without.

    .venv/bin/python -m bench.filters [--messages 20000] [--repeats 3]

One broker process (the default serving), 4 client threads posting batches of 100 tagged
messages (~200 bytes, tags t0..t19 in turn). Three topics, each with 20 groups g0..g19:

- `plain`: no filters, every publish is copied to all 20 groups;
- `all`: every group filters with an expression its every publish matches
  (`tag IS NOT NULL AND n >= 0`): the same 20 copies, plus the filters' evaluation;
- `one`: group gi takes only tag ti (`{"tags": ["ti"]}`): one copy per publish, 19 skips
  counted.

Answers publishes/s and rows/s for each, median (min-max) of the repeats; writes nothing but
its own database (`mq_e2e_filters_<MQ_BENCH_ID>`, named by BenchBroker).
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from bench import load
from bench.common import BenchBroker, payload, summary

GROUPS = 20
TOPICS = {
    "plain": lambda i: None,
    "all": lambda i: {"expression": "tag IS NOT NULL AND n >= 0"},
    "one": lambda i: {"tags": [f"t{i}"]},
}
COPIES = {"plain": GROUPS, "all": GROUPS, "one": 1}


def _setup(broker: BenchBroker) -> None:
    with load._client(broker) as client:
        for topic, spec in TOPICS.items():
            client.post("/api/v1/topics", json={"topic": f"f-{topic}"}).raise_for_status()
            for i in range(GROUPS):
                body: dict[str, Any] = {"group": f"g{i}"}
                if spec(i) is not None:
                    body["filter"] = spec(i)
                client.post(f"/api/v1/topics/f-{topic}/groups", json=body).raise_for_status()


def _publish_rate(broker: BenchBroker, topic: str, messages: int) -> float:
    share = messages // load.THREADS

    def work(_thread: int) -> int:
        sent = 0
        with load._client(broker) as client:
            while sent < share:
                n = min(load.BATCH, share - sent)
                body = {"messages": [
                    {"topic": topic, "data": payload(sent + k), "tag": f"t{(sent + k) % GROUPS}",
                     "headers": {"n": str(sent + k)}}
                    for k in range(n)]}
                response = client.post("/api/v1/messages", json=body)
                if response.status_code != 201:
                    raise RuntimeError(f"produce answered {response.status_code}: {response.text[:300]}")
                sent += n
        return sent

    seconds, counts = load._in_threads(load.THREADS, work)
    return sum(counts) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000, help="publishes per run")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    broker = BenchBroker("filters")  # named after MQ_BENCH_ID by BenchBroker
    broker.setup()
    broker.start()
    try:
        _setup(broker)
        rates: dict[str, list[float]] = {topic: [] for topic in TOPICS}
        for _ in range(args.repeats):
            for topic in TOPICS:  # interleaved: the machine's load drifts alike for all three
                broker.truncate()
                rates[topic].append(_publish_rate(broker, f"f-{topic}", args.messages))
        figures = {topic: {"publishes_per_s": summary(values), "rows_per_s": summary(v * COPIES[topic] for v in values)}
                   for topic, values in rates.items()}
        print(json.dumps({"groups": GROUPS, "messages": args.messages, "repeats": args.repeats,
                          "load": os.getloadavg(), "figures": figures}, indent=2))
    finally:
        broker.teardown()


if __name__ == "__main__":
    main()
