"""`wake_all`: many waiting pulls woken from another thread with one call into their loop."""

from __future__ import annotations

import asyncio
import threading

from registry.wakeups import LoopEvent, wake_all


class CountingLoop(asyncio.SelectorEventLoop):
    """An event loop that counts the callbacks other threads hand it."""

    def __init__(self) -> None:
        super().__init__()
        self.threadsafe_calls = 0

    def call_soon_threadsafe(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.threadsafe_calls += 1
        return super().call_soon_threadsafe(*args, **kwargs)


def _running(loop: asyncio.AbstractEventLoop) -> threading.Thread:
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    return thread


def test_a_thousand_waiters_are_woken_with_one_call_into_their_loop():
    loop = CountingLoop()
    thread = _running(loop)
    try:
        events = [LoopEvent(loop) for _ in range(1000)]
        waits = [asyncio.run_coroutine_threadsafe(e.wait(30), loop) for e in events]
        # Every coroutine is parked on its waiter before the wake (else wait() would see the
        # flag set and return without needing the wake-up).
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0.05), loop).result(5)
        before = loop.threadsafe_calls

        wake_all(events)

        assert [w.result(5) for w in waits] == [True] * 1000
        assert loop.threadsafe_calls - before == 1
        assert all(e.is_set() for e in events)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


def test_events_of_two_loops_are_each_woken_on_their_own_loop_and_a_set_event_is_not_queued_again():
    loops = [CountingLoop(), CountingLoop()]
    threads = [_running(loop) for loop in loops]
    try:
        first, second = LoopEvent(loops[0]), LoopEvent(loops[1])
        already = LoopEvent(loops[0])
        already.set()
        waits = [asyncio.run_coroutine_threadsafe(e.wait(30), e._loop) for e in (first, second)]
        for loop in loops:
            asyncio.run_coroutine_threadsafe(asyncio.sleep(0.05), loop).result(5)
        before = [loop.threadsafe_calls for loop in loops]

        wake_all([first, second, already])

        assert [w.result(5) for w in waits] == [True, True]
        assert [loop.threadsafe_calls - b for loop, b in zip(loops, before, strict=True)] == [1, 1]
        # The event set before still answers its next wait at once.
        assert asyncio.run_coroutine_threadsafe(already.wait(30), loops[0]).result(5) is True
    finally:
        for loop, thread in zip(loops, threads, strict=True):
            loop.call_soon_threadsafe(loop.stop)
            thread.join(5)
            loop.close()
