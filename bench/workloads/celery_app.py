"""Peer: Celery 5 on Redis. No-op tasks (they count, the bookkeeping every system's
no-op handler does in the bench: `counter.py`) and a latency probe.

Worker: `celery -A bench.workloads.celery_app worker -c 2`.
"""

from __future__ import annotations

import os
import time

import redis
from celery import Celery

from bench.workloads.counter import HandledCounter

# The bench run's MQ_BENCH_ID, in its Redis keys (see bench/common.py).
KEY_ID = f"{os.environ['MQ_BENCH_ID']}:" if os.environ.get("MQ_BENCH_ID") else ""

BROKER = os.environ.get("BENCH_CELERY_BROKER", "redis://127.0.0.1:6379/8")
COUNTER_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/7")

app = Celery("bench", broker=BROKER)
# A queue of its own: a Redis database may be shared, and a worker must never take (and
# drop as unknown) another application's tasks.
QUEUE = "mqcenter-bench"
app.conf.update(task_ignore_result=True, task_default_queue=QUEUE, worker_hijack_root_logger=False,
                broker_connection_retry_on_startup=True)
_redis = redis.Redis.from_url(COUNTER_URL)
_handled = HandledCounter(COUNTER_URL)


@app.task(name="bench.noop")
def noop(run: str) -> None:
    _handled.add(run)


@app.task(name="bench.latency")
def latency(run: str, t0: float) -> None:
    _redis.rpush(f"bench:{KEY_ID}latency:{run}", time.time() - t0)
