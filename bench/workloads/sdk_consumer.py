"""The MQ Center consumer the bench runs: `python -m mqclient run bench.workloads.sdk_consumer`.

BENCH_TOPIC names the topic (BENCH_GROUP the group); BENCH_MODE=noop counts handled messages (`counter.py`, the same
bookkeeping the peers' no-op tasks do), BENCH_MODE=latency records
handler start minus the producer's call start (carried in the message) in a Redis list.
"""

from __future__ import annotations

import os
import time

import redis

from bench.workloads.counter import handled_counter
from mqclient import Message, consumer

# The bench run's MQ_BENCH_ID, in its Redis keys (see bench/common.py).
KEY_ID = f"{os.environ['MQ_BENCH_ID']}:" if os.environ.get("MQ_BENCH_ID") else ""

TOPIC = os.environ.get("BENCH_TOPIC", "bench")
MODE = os.environ.get("BENCH_MODE", "noop")
_redis = redis.Redis.from_url(os.environ["BENCH_REDIS_URL"])
_handled = handled_counter()


@consumer(
    TOPIC,
    group=os.environ.get("BENCH_GROUP", "default"),
    concurrency=int(os.environ.get("BENCH_CONCURRENCY", "4")),
    prefetch=int(os.environ.get("BENCH_PREFETCH", "96")),
)
def handle(message: Message) -> None:
    if MODE == "latency":
        started = time.time()
        _redis.rpush(f"bench:{KEY_ID}latency:{TOPIC}", started - float(message.data["t0"]))
    else:
        _handled.add(TOPIC)
