"""How every system's no-op handler in the bench counts what it handled.

A no-op handler adds to an in-process count, and a thread adds that count to Redis every
FLUSH_SECONDS: a drain ends at most FLUSH_SECONDS late, against drains of 10 s and more. One
Redis INCR per message would make the bookkeeping the biggest part of a "no-op" handler
(py-spy during `python -m bench e2e`: 63% of an SDK consumer process's samples, ~90 µs a
message), for MQ Center and every peer alike, while the database-limit baseline they are
judged against counts nothing. A process that ends
(django-q2 replaces each worker after 500 tasks) flushes what it counted as it exits.
"""

from __future__ import annotations

import atexit
import multiprocessing.util
import os
import threading
import time

import redis

# The bench run's MQ_BENCH_ID, in its Redis keys (see bench/common.py).
KEY_ID = f"{os.environ['MQ_BENCH_ID']}:" if os.environ.get("MQ_BENCH_ID") else ""

FLUSH_SECONDS = 0.01


class HandledCounter:
    """`add()` from any thread of any process; Redis key `bench:done:RUN` gets the sum."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.lock = threading.Lock()
        self.pending: dict[str, int] = {}
        self.client: redis.Redis | None = None  # this process's; set by the first add
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        # The fork copied the lock as it was: held, if the flush thread had it at that moment.
        # And a fork has no threads: the child's first add starts its own flush thread.
        self.lock = threading.Lock()
        self.pending = {}  # the parent flushes its own
        self.client = None

    def add(self, run: str) -> None:
        with self.lock:
            if self.client is None:
                self._start()
            self.pending[run] = self.pending.get(run, 0) + 1

    def _start(self) -> None:
        """Flush every FLUSH_SECONDS from a thread, and once more at exit: at the
        interpreter's, or at a multiprocessing child's (which skips atexit)."""
        self.client = redis.Redis.from_url(self.url)
        threading.Thread(target=self._flush_forever, daemon=True).start()
        atexit.register(self.flush)
        multiprocessing.util.Finalize(None, self.flush, exitpriority=0)

    def _flush_forever(self) -> None:
        while True:
            time.sleep(FLUSH_SECONDS)
            self.flush()

    def flush(self) -> None:
        with self.lock:
            pending, self.pending, client = self.pending, {}, self.client
        if client is None:
            return
        for run, count in pending.items():
            client.incrby(f"bench:{KEY_ID}done:{run}", count)


def handled_counter() -> HandledCounter:
    return HandledCounter(os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/7"))
