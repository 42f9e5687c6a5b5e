"""Wake hints (registry/wakeups.py): a few waiters per hint, or as many as a produce stored
messages for; the count crosses processes in the Redis signal. A coroutine's `LoopEvent`
is woken from any thread, or held without waking it."""

from __future__ import annotations

import asyncio
import threading
import uuid

from django.conf import settings

from registry.wakeups import WAKE_PER_PAIR, LoopEvent, WakeupHub


def waiting(hub: WakeupHub, count: int, pair: tuple[str, str] = ("t", "g")) -> list[threading.Event]:
    events = [threading.Event() for _ in range(count)]
    for event in events:
        hub._waiters.setdefault(pair, {})[event] = None  # as `waiter()` registers them
    return events


def test_a_hint_wakes_a_few_waiters_and_a_count_wakes_that_many() -> None:
    hub = WakeupHub()
    events = waiting(hub, 10)
    hub.publish([("t", "g")])
    assert sum(e.is_set() for e in events) == WAKE_PER_PAIR
    hub.publish({("t", "g"): 5})
    assert sum(e.is_set() for e in events) == WAKE_PER_PAIR + 5
    hub.publish({("t", "g"): 1000, ("other", "g"): 3})
    assert all(e.is_set() for e in events)


def test_the_count_crosses_processes_over_redis() -> None:
    """Two hubs as two broker processes would hold them, on the real Redis (a channel of
    this test's own)."""
    channel = f"mqcenter:wake:test:{uuid.uuid4().hex}"
    there, here = WakeupHub(settings.REDIS_URL, channel), WakeupHub(settings.REDIS_URL, channel)
    events = waiting(there, 10)
    there._ensure_listener()
    # Its subscriber is up once it has woken everyone, as it does when it connects.
    assert all(e.wait(10) for e in events), "the subscriber never connected"
    for event in events:
        event.clear()
    here.publish({("t", "g"): 6})
    assert all(e.wait(5) for e in events[:6])
    assert not any(e.is_set() for e in events[6:])


def test_a_loop_event_set_from_another_thread_ends_the_wait_and_a_held_one_does_not() -> None:
    async def scenario() -> tuple[bool, bool, bool, bool]:
        loop = asyncio.get_running_loop()
        woken = LoopEvent(loop)
        waiting_woken = asyncio.ensure_future(woken.wait(5))
        await asyncio.sleep(0)
        await loop.run_in_executor(None, woken.set)
        ended = await asyncio.wait_for(waiting_woken, 2)

        held = LoopEvent(loop)
        waiting_held = asyncio.ensure_future(held.wait(5))
        await asyncio.sleep(0)
        await loop.run_in_executor(None, held.hold)  # as a produce takes a pull's offer
        await asyncio.sleep(0.05)
        still_waiting = not waiting_held.done() and held.is_set()
        held.resume()  # as its settlement does
        return ended, still_waiting, await asyncio.wait_for(waiting_held, 2), held.is_set()

    assert asyncio.run(scenario()) == (True, True, True, True)
