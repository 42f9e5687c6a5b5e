"""A small pool of daemon worker threads for running handlers.

Not ``concurrent.futures.ThreadPoolExecutor``: its threads are joined at interpreter exit, so a
handler stuck past its timeout (threads cannot be killed in Python) would keep a stopped
consumer process alive forever. These threads are daemons; the runner's slot accounting, not
the pool, decides how many handlers run at once, and the pool only refuses to grow past
``max_threads``.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

logger = logging.getLogger("mqclient.pool")

Task = Callable[[], None]


class WorkerPool:
    """Run tasks on reusable daemon threads, spawning one only when no thread is idle."""

    def __init__(self, name: str, max_threads: int) -> None:
        self.name = name
        self.max_threads = max_threads
        self._tasks: queue.SimpleQueue[Task | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0

    def submit(self, task: Task) -> None:
        """Queue ``task``; it starts at once when the caller kept within ``max_threads``."""
        with self._lock:
            spawn = self._idle == 0 and self._threads < self.max_threads
            if spawn:
                self._threads += 1
            else:
                self._idle -= 1 if self._idle else 0
        self._tasks.put(task)
        if spawn:
            thread = threading.Thread(
                target=self._work, name=f"{self.name}-{self._threads}", daemon=True
            )
            thread.start()

    def _work(self) -> None:
        while True:
            task = self._tasks.get()
            if task is None:
                return
            try:
                task()
            except BaseException:  # the task reports its own errors; keep the thread alive
                logger.exception("worker task raised")
            with self._lock:
                self._idle += 1

    def shutdown(self) -> None:
        """Ask idle threads to exit; busy ones exit after their task (they are daemons)."""
        with self._lock:
            count = self._threads
        for _ in range(count):
            self._tasks.put(None)
