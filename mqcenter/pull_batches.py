"""Work for many waiters, batched per key: while one run for a key is under way, the
waiters of that key that arrive meanwhile queue, and the next run takes them together (up
to `max_batch` at a time).

The long-poll (`mqcenter/longpoll.py`) claims for woken pulls this way: the first pull woken
for a (topic, group) starts a run at the event loop's next turn, with the pulls woken in the
same turn (a burst's wake hint resumes hundreds at once; alone, the first would hold up all
of them for a transaction of its own); the pulls woken while it claims are claimed for
together by the next runs, one transaction per run instead of one per pull.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class KeyedBatches(Generic[T, R]):
    """`await submit(key, item)` answers `run(items)`'s result for `item`, where `run` (a
    coroutine function answering one result per item, in order) ran for a batch of the
    items of `key` submitted together. One run per key at a time; the event loop's thread
    only."""

    def __init__(self, run: Callable[[list[T]], Awaitable[list[R]]], max_batch: int) -> None:
        self.run = run
        self.max_batch = max_batch
        self._queued: dict[Hashable, list[tuple[T, asyncio.Future[R]]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def running(self, key: Hashable) -> bool:
        return key in self._queued

    async def submit(self, key: Hashable, item: T) -> R:
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        queued = self._queued.get(key)
        if queued is not None:  # a run for this key is under way: the next one takes it
            queued.append((item, future))
        else:
            self._queued[key] = []
            task = asyncio.get_running_loop().create_task(self._runs(key, [(item, future)]))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return await future

    async def _runs(self, key: Hashable, batch: list[tuple[T, asyncio.Future[R]]]) -> None:
        try:
            # The task starts a turn of the loop after the first submit: those submitted in
            # that turn go with it.
            batch = self._next_batch(key, batch)
            while batch:
                try:
                    results = await self.run([item for item, _ in batch])
                    if len(results) != len(batch):
                        raise RuntimeError(f"{len(results)} results for {len(batch)} items")
                except Exception as exc:  # noqa: BLE001 - each waiter gets the error
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                else:
                    for (_, future), result in zip(batch, results, strict=True):
                        if not future.done():  # its waiter may have been cancelled
                            future.set_result(result)
                batch = self._next_batch(key, [])
        finally:
            for _, future in self._queued.pop(key, []):
                if not future.done():
                    future.cancel()

    def _next_batch(self, key: Hashable, batch: list[tuple[T, asyncio.Future[R]]]) -> list[tuple[T, asyncio.Future[R]]]:
        """`batch` filled up to `max_batch` from the key's queue, in order. An item whose
        waiter was cancelled meanwhile is dropped: running it (claiming for a pull whose
        client is gone) would be work for nobody."""
        queued = self._queued[key]
        taken = 0
        while taken < len(queued) and len(batch) < self.max_batch:
            if not queued[taken][1].done():
                batch.append(queued[taken])
            taken += 1
        del queued[:taken]
        return batch
