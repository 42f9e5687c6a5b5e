"""Wake hints (registry/wakeups.py): a few waiters per hint, or as many as a produce stored
messages for; the count crosses processes in the Redis signal."""

from __future__ import annotations

import threading
import uuid

from django.conf import settings

from registry.wakeups import WAKE_PER_PAIR, WakeupHub


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
