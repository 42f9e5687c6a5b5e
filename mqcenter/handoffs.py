"""Parked pulls open to a hand-off: a produce in this process stores a message already
leased to one of them and gives it the stored rows after the commit, so the pull answers
without a claim of its own (one commit per delivery instead of two).

The long-poll (`mqcenter/longpoll.py`) opens an `Offer` for each wait of a parked pull and
closes it when the wait ends. A produce `take`s open offers of its messages' (topic,
group) before its INSERT, and then must settle each: `fulfil(rows)` once they are committed,
or `decline()` when they are not. Taking and closing are exclusive under one lock: an offer
closed first cannot be taken. Taking holds the pull's wake flag (`LoopEvent.hold`), so wake
hints go to the other waiters meanwhile, without waking the pull: the settlement wakes it,
once (a burst's hundreds of takes would otherwise resume as many coroutines on the event
loop while the produce still inserts). A pull whose timer ends first waits for the
settlement, up to `settled(timeout)`: after that it gives up (`fulfil` then answers False,
and the produce puts the rows back), so a produce held up by a lock cannot hold a pull past
its client's patience.

Which pulls and messages may meet this way is the delivery core's rule
(`messages/delivery/handoff.py`); this module only keeps the offers.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from mqcenter.core.keyed import registered

Pair = tuple[str, str]


class Offer:
    """One parked pull's wait, open to a hand-off. `spec` says what the pull asks for;
    `answer(rows)` renders its answer."""

    __slots__ = ("_answer", "_lock", "_loop", "_outcome", "_settled", "_wake", "spec", "taken")

    def __init__(self, spec: Any, answer: Callable[[list[Any]], bytes], loop: asyncio.AbstractEventLoop,
                 wake: Any) -> None:
        self.spec = spec
        self.taken = False
        self._answer = answer
        self._loop = loop
        self._wake = wake  # the pull's LoopEvent
        self._settled: asyncio.Future[bytes | None] = loop.create_future()
        self._lock = threading.Lock()
        self._outcome = ""  # "settled" by the produce, or "abandoned" by the pull: the first wins

    def fulfil(self, rows: list[Any]) -> bool:
        """The rows leased to this pull are committed: it answers them. False when the pull
        gave up waiting first: the caller must put the rows back. Any thread: the answer is
        rendered on it, not on the event loop, which a burst's hundreds of hand-overs would
        otherwise hold up."""
        answer = self._answer(rows)
        if not self._decide("settled"):
            return False
        self._loop.call_soon_threadsafe(self._settle, answer)
        return True

    def decline(self) -> None:
        """Nothing was stored for it: it claims as usual. Any thread."""
        if self._decide("settled"):
            self._loop.call_soon_threadsafe(self._settle, None)

    def _settle(self, answer: bytes | None) -> None:
        _resolve(self._settled, answer)
        self._wake.resume()  # the pull may still sleep in its wait: taking it only held it

    async def settled(self, timeout: float) -> bytes | None:
        """The answer to send, or None when the produce declined or took longer than
        `timeout` seconds. Only after `taken`; the event loop's thread."""
        timer = self._loop.call_later(timeout, self.abandon)
        try:
            return await self._settled
        finally:
            timer.cancel()

    def abandon(self) -> None:
        """The pull stops waiting for this offer (it timed out, or its task ends): a later
        `fulfil` answers False. The event loop's thread; nothing once settled."""
        if self._decide("abandoned"):
            _resolve(self._settled, None)

    def _decide(self, outcome: str) -> bool:
        with self._lock:
            if self._outcome:
                return False
            self._outcome = outcome
            return True


def _resolve(future: asyncio.Future[bytes | None], answer: bytes | None) -> None:
    if not future.done():
        future.set_result(answer)


class Offers:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        # Insertion-ordered: the longest-waiting pull of a pair is handed to first.
        self._open: dict[Pair, dict[Offer, None]] = {}

    def __bool__(self) -> bool:
        return bool(self._open)  # read without the lock: a hint for the produce's fast path

    @contextmanager
    def opened(self, pair: Pair, spec: Any, answer: Callable[[list[Any]], bytes], wake: Any) -> Iterator[Offer]:
        """An offer open while the block runs (the pull's wait); closed after it. The event
        loop's thread only."""
        with registered(self._lock, self._open, pair, Offer(spec, answer, asyncio.get_running_loop(), wake)) as offer:
            yield offer

    def take(self, pair: Pair, capacity: Callable[[Any], int], rows: int) -> list[tuple[Offer, int]]:
        """Open offers of `pair`, longest-open first, taken until they hold `rows`: each with
        how many it gets, at most `capacity(spec)` (0 passes the offer by). The caller must
        `fulfil` or `decline` each. Any thread; `capacity` runs under the lock, so it must
        not wait on anything. A pull already woken is left to claim: what woke it is for it
        to find."""
        taken: list[tuple[Offer, int]] = []
        with self._lock:
            open_now = self._open.get(pair)
            if open_now is None:
                return taken
            for offer in open_now:
                if rows <= 0:
                    break
                share = 0 if offer._wake.is_set() else min(rows, capacity(offer.spec))
                if share > 0:
                    taken.append((offer, share))
                    rows -= share
            for offer, _ in taken:
                offer.taken = True
                offer._wake.hold()  # hints skip it meanwhile; the settlement wakes it
                del open_now[offer]
            if not open_now:
                del self._open[pair]
        return taken


offers = Offers()
