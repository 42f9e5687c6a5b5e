"""Wake-ups for long-polling pulls.

A produce that commits (or a released / recovered message) publishes "(topic, group) has
work"; every broker process wakes its pulls waiting on that pair within milliseconds.
With REDIS_URL set the signal crosses processes over Redis pub/sub (one subscriber thread
per process, however many pulls wait); without it (the quick start) it stays in-process.

Wake-ups are an optimisation, never the source of truth: a waiting pull also re-checks
the database on a short fallback interval, so a lost wake-up (Redis down, a publish that
raced a subscribe) only costs latency, never a message.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from itertools import islice
from typing import Any

from django.conf import settings

from mqcenter.core.keyed import registered

logger = logging.getLogger(__name__)

CHANNEL = "mqcenter:wake"
WAKE_PER_PAIR = 2
Pair = tuple[str, str]
ANY: Pair = ("*", "*")  # listen() to every pair


class LoopEvent:
    """What a coroutine waits on where a thread would wait on a `threading.Event`: `set()`
    from any thread wakes the waiting coroutine on its event loop. `hold()` sets the flag
    without waking it, for a waiter whose wake-up comes later by `resume()`. `clear()`,
    `wait()` and `resume()` belong to the loop's thread, and one coroutine waits on it at a
    time.

    A bare future and a timer, not `asyncio.wait_for` on an `asyncio.Event`: on Python 3.11
    `wait_for` wraps each wait in a task of its own, and a thousand pulls woken together
    paid for that on the one event loop.
    """

    __slots__ = ("_flag", "_loop", "_waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._flag = False
        self._waiter: asyncio.Future[None] | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        if not self._flag:
            self._flag = True
            self._loop.call_soon_threadsafe(self.resume)

    def hold(self) -> None:
        """Set the flag (wake hints pass this waiter by) but let it sleep on. Any thread."""
        self._flag = True

    def resume(self) -> None:
        """End the current wait, whatever the flag says."""
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def clear(self) -> None:
        # A set() racing this clear() may still wake the next wait(): one spurious wake-up,
        # and a waiting pull re-checks the database anyway.
        self._flag = False

    async def wait(self, timeout: float | None = None) -> bool:
        if self._flag:
            return True
        waiter = self._waiter = self._loop.create_future()
        timer = None if timeout is None else self._loop.call_later(timeout, _expire, waiter)
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()
        return self._flag


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


Wake = threading.Event | LoopEvent


class WakeupHub:
    def __init__(self, redis_url: str = "", channel: str = CHANNEL) -> None:
        self.redis_url = redis_url
        self.channel = channel
        self._lock = threading.Lock()
        # Insertion-ordered (dict keys), so the longest-waiting pulls are woken first.
        self._waiters: dict[Pair, dict[Wake, None]] = {}
        self._callbacks: dict[Pair, set[Callable[[Pair], None]]] = {}
        self._listener: threading.Thread | None = None
        self._publisher: Any = None
        # True while the Redis subscriber is connected (or when there is no Redis): waiting
        # pulls then trust wake-ups and fall back to polling only rarely.
        self.connected = not redis_url
        self.connected_at = 0.0  # time.monotonic() when the subscriber last connected
        self._origin: tuple[int, str] = (0, "")  # (pid, origin) of the process it was made for

    @property
    def origin(self) -> str:
        """Tells this process's own signals apart when Redis echoes them back (checked per
        call: a forked child is another process)."""
        pid = os.getpid()
        if self._origin[0] != pid:
            self._origin = (pid, f"{socket.gethostname()}:{pid}:{id(self)}")
        return self._origin[1]

    # --- waiting -------------------------------------------------------------------------

    @contextmanager
    def waiter(self, topic: str, group: str, event: Wake | None = None) -> Iterator[Wake]:
        """Register interest before checking the database, so no wake-up slips between.
        A thread waits on the `threading.Event` given by default; a coroutine passes a
        `LoopEvent`."""
        self._ensure_listener()
        with registered(self._lock, self._waiters, (topic, group), threading.Event() if event is None else event) as held:
            yield held

    def listen(self, pairs: Iterable[Pair], callback: Callable[[Pair], None]) -> Callable[[], None]:
        """Call `callback(pair)` (from the notifying thread) whenever a pair has work, or
        any pair for `ANY`.

        For push subscribers (WebSockets). Returns the function that stops listening.
        """
        self._ensure_listener()
        pairs = list(pairs)
        with self._lock:
            for pair in pairs:
                self._callbacks.setdefault(pair, set()).add(callback)

        def stop() -> None:
            with self._lock:
                for pair in pairs:
                    callbacks = self._callbacks.get(pair)
                    if callbacks is not None:
                        callbacks.discard(callback)
                        if not callbacks:
                            del self._callbacks[pair]

        return stop

    def notify_local(self, pairs: Iterable[Pair], limit: int = WAKE_PER_PAIR,
                     counts: Mapping[Pair, int] | None = None) -> None:
        """Wake up to `limit` idle waiters per pair (not all of them: a thousand pulls
        claiming one message at once would be a thundering herd), or as many as `counts`
        says the pair got messages, if more. A pull that comes back full wakes more, so a
        big batch still reaches everyone, in logarithmic rounds."""
        pairs = list(pairs)
        counts = counts or {}
        with self._lock:
            # islice: stop at the limit, not after testing every one of a thousand waiters.
            events = [
                event
                for pair in pairs
                for event in islice((e for e in self._waiters.get(pair, ()) if not e.is_set()),
                                    max(limit, counts.get(pair, 0)))
            ]
            calls = [(cb, pair) for pair in pairs for cb in (*self._callbacks.get(pair, ()), *self._callbacks.get(ANY, ()))]
        for event in events:
            event.set()
        for callback, pair in calls:
            try:
                callback(pair)
            except Exception:
                logger.exception("wake-up callback failed")

    def fallback_seconds(self) -> float:
        """How long a waiting pull trusts wake-ups before checking the database itself.

        Jittered, so a thousand waiters do not re-check in the same instant; short while
        the Redis subscriber is down and wake-ups from other processes cannot arrive.
        """
        base = settings.MQ_FALLBACK_POLL_SECONDS
        if not self.connected:
            base = min(base, 0.5)
        return base * random.uniform(0.75, 1.25)

    # --- publishing ----------------------------------------------------------------------

    def publish(self, pairs: Iterable[Pair] | Mapping[Pair, int]) -> None:
        """Tell every broker process that these (topic, group) pairs have work; given as a
        mapping, how many messages each got (a big produce then wakes that many waiters at
        once, not a few that wake the others in rounds)."""
        counts = {tuple(p): int(n) for p, n in pairs.items()} if isinstance(pairs, Mapping) else {}
        unique = sorted(set(pairs))
        if not unique:
            return
        # This process's own waiters at once, not after a round trip through Redis.
        self.notify_local(unique, counts=counts)  # type: ignore[arg-type]
        if not self.redis_url:
            return
        signal: dict[str, Any] = {"from": self.origin, "pairs": unique}
        if counts:
            signal["counts"] = [counts.get(pair, 0) for pair in unique]
        try:
            self._redis_publisher().publish(self.channel, json.dumps(signal))
        except Exception as exc:  # noqa: BLE001 - Redis is not on the durability path
            logger.warning("wake-up publish failed (%s); woke local pulls only", exc)

    def _redis_publisher(self):  # type: ignore[no-untyped-def]
        if self._publisher is None:
            import redis

            self._publisher = redis.Redis.from_url(
                self.redis_url, socket_connect_timeout=0.5, socket_timeout=0.5
            )
        return self._publisher

    # --- the subscriber ------------------------------------------------------------------

    def _ensure_listener(self) -> None:
        if not self.redis_url or self._listener is not None:
            return
        with self._lock:
            if self._listener is None:
                self._listener = threading.Thread(
                    target=self._listen, name="mq-wakeup-listener", daemon=True
                )
                self._listener.start()

    def _listen(self) -> None:
        import redis

        backoff = 0.2
        while True:
            try:
                client = redis.Redis.from_url(
                    self.redis_url, socket_connect_timeout=1, health_check_interval=10
                )
                pubsub = client.pubsub(ignore_subscribe_messages=True)
                pubsub.subscribe(self.channel)
                self.connected = True
                self.connected_at = time.monotonic()
                backoff = 0.2
                # Anything published while we were away is unknown: wake everyone once.
                self._wake_all()
                while True:
                    item = pubsub.get_message(timeout=1.0)
                    if item is None or item.get("type") != "message":
                        continue
                    signal = json.loads(item["data"])
                    if signal["from"] != self.origin:  # our own were woken when published
                        pairs = [tuple(pair) for pair in signal["pairs"]]
                        counts = dict(zip(pairs, signal.get("counts", ()), strict=False))
                        self.notify_local(pairs, counts=counts)  # type: ignore[arg-type]
            except Exception as exc:  # noqa: BLE001 - reconnect on any failure
                if self.connected:
                    logger.warning("wake-up subscriber lost Redis (%s); polling meanwhile", exc)
                self.connected = False
                time.sleep(backoff)
                backoff = min(backoff * 2, 5.0)

    def _wake_all(self) -> None:
        with self._lock:
            pairs = list(self._waiters) + list(self._callbacks)
        self.notify_local(pairs, limit=1_000_000)


_hub: WakeupHub | None = None
_hub_lock = threading.Lock()


def wakeup_hub() -> WakeupHub:
    """The process-wide hub (created lazily so settings are read after configuration)."""
    global _hub
    if _hub is None:
        with _hub_lock:
            if _hub is None:
                _hub = WakeupHub(settings.REDIS_URL)
    return _hub
