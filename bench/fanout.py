"""Fan-out: what a publish costs with 1, 2 and 4 subscribed groups, and end-to-end delivery
per copy with 2 groups. Same sitting, same broker, so the ratios compare like with like.

Target (issue "Publish/subscribe"): a publish to N groups costs no more than N times one to
a single group (rows/s at least the single group's), and end-to-end per delivered copy stays
at 0.5x the database limit or better (the limit is the `baselines` figure's).
"""

from __future__ import annotations

from typing import Any

from bench import load
from bench.common import BenchBroker, Results, Scale, summary


def _topic_with_groups(broker: BenchBroker, topic: str, groups: int) -> None:
    with load._client(broker) as client:
        response = client.post("/api/v1/topics", json={
            "topic": topic, "groups": [{"group": f"g{i}"} for i in range(groups)]})
        response.raise_for_status()


def fanout(scale: Scale, results: Results) -> None:
    broker = BenchBroker("fanout")
    broker.setup()
    broker.start()
    try:
        produce: dict[str, Any] = {}
        for groups in (1, 2, 4):
            topic = f"fan{groups}"
            _topic_with_groups(broker, topic, groups)
            rates = []
            for _ in range(scale.repeats):
                broker.truncate()
                rates.append(load.produce_rate(broker, topic, scale.produce_messages))
            produce[str(groups)] = {"publishes_per_s": summary(rates),
                                    "rows_per_s": summary(r * groups for r in rates)}
        results.put("mq_fanout_produce", {"unit": "publishes/s and rows/s", "messages": scale.produce_messages,
                                          "groups": produce})
        _topic_with_groups(broker, "fan-e2e", 2)
        copies = []
        for _ in range(scale.repeats):
            broker.truncate()
            copies.append(load.fanout_e2e_rate(broker, "fan-e2e", ["g0", "g1"], scale.e2e_messages))
        results.put("mq_fanout_e2e", {"unit": "copies/s", "groups": 2, "messages": scale.e2e_messages,
                                      **summary(copies)})
    finally:
        broker.teardown()
