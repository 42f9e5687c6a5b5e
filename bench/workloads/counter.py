"""How every system's no-op handler in the bench counts what it handled.

One Redis INCR per message made the bookkeeping the biggest part of a "no-op" handler:
in session 12, py-spy put 63% of an SDK consumer process's samples in it (~90 µs a
message, ~22% of the machine's CPU at the drain's rate), for MQ Center and for every peer,
while the database-limit baseline it is judged against counts nothing. The handler now
adds to an in-process count, and a thread adds that count to Redis every FLUSH_SECONDS: a
drain ends at most FLUSH_SECONDS late, against drains of 10 s and more. (What a process
counted in the last FLUSH_SECONDS before it exits is lost: every worker here lives until
the drain it takes part in is counted.)
"""

from __future__ import annotations

import os
import threading
import time

import redis

FLUSH_SECONDS = 0.01


class HandledCounter:
    """`add()` from any thread of any process; Redis key `bench:done:RUN` gets the sum."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.lock = threading.Lock()
        self.pending: dict[str, int] = {}
        self.flushing = False  # started on the first add in each process: Celery and
        # django-q2 fork their workers after importing the handler, and a fork has no threads
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        # The fork copied the lock as it was: held, if the flush thread had it at that moment.
        self.lock = threading.Lock()
        self.pending = {}  # the parent flushes its own
        self.flushing = False

    def add(self, run: str) -> None:
        with self.lock:
            if not self.flushing:
                self.flushing = True
                threading.Thread(target=self._flush_forever, daemon=True).start()
            self.pending[run] = self.pending.get(run, 0) + 1

    def _flush_forever(self) -> None:
        client = redis.Redis.from_url(self.url)
        while True:
            time.sleep(FLUSH_SECONDS)
            with self.lock:
                pending, self.pending = self.pending, {}
            for run, count in pending.items():
                client.incrby(f"bench:done:{run}", count)


def handled_counter() -> HandledCounter:
    return HandledCounter(os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/7"))
