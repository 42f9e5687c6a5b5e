"""Hand-off: a produce gives its messages straight to pulls idle-waiting in this process.

Without it, a message produced for an idle consumer costs two transactions in a row: the
produce's insert, then (after a wake-up) the woken pull's claim, which reads the row back,
leases it and writes its PULLED trace. Measured on 2 cores (session 7), the claim was about
2.5 ms of the ~8.7 ms delivery latency, and a produce of 1,000 messages to 1,000 waiting
pulls spent ~250 ms in the rounds of claims behind it. Here the produce inserts the message
already leased to a waiting pull, with its PULLED trace row, in its own transaction, and
the pull answers from memory once that transaction commits.

What may be handed: a fresh (not a dedup repeat), due message of a queue-mode group whose
topic is not paused. Serial and sharded groups keep their claims, whose ordering rules need
the database's view of the group. The pulls that take part are the fast path's coroutines
(`messages_pull_async`); a pull waiting on a thread (`MQ_FAST_PATH=0`, or a request the fast
path leaves to Django) and pulls in other broker processes are woken and claim as before.

Nothing is lost on any path:
- A pull is reserved under a lock before the insert, so no two produces hand to one pull.
- If the produce's transaction fails, its reserved pulls go back to waiting (or, if their
  wait ended meanwhile, return empty): nothing was stored.
- A pull whose wait ends while a produce holds it waits for that produce's outcome (one
  short transaction) and answers with what it was handed.
- A pull cancelled (its client went away) while a produce holds it: once the produce
  commits, its messages are released at once (NEW again, no attempt spent), as a consumer
  releases what it will not start.
- A pull answered but never received: the lease expires and recovery redelivers, as for
  any claimed message.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any

from messages.models import Message
from mqcenter import metrics
from mqcenter.auth import Principal
from registry.wakeups import LoopEvent

Pair = tuple[str, str]

# An offer's life: IDLE (waiting, may be reserved) -> RESERVED (a produce holds it) ->
# HANDED (committed; `messages` is its answer). LEAVING: reserved when its wait ended, it
# waits for the outcome. ABANDONED: reserved when its pull was cancelled. GONE: withdrawn.
IDLE, RESERVED, LEAVING, ABANDONED, HANDED, GONE = "idle", "reserved", "leaving", "abandoned", "handed", "gone"


class Offer:
    """A waiting pull, open to a hand-off."""

    __slots__ = ("consumer", "limit", "messages", "pair", "principal", "state", "wake")

    def __init__(self, pair: Pair, principal: Principal, consumer: str, limit: int, wake: LoopEvent) -> None:
        self.pair, self.principal, self.consumer, self.limit, self.wake = pair, principal, consumer, limit, wake
        self.state = IDLE
        self.messages: list[Message] = []


@dataclass
class Reservation:
    """The pulls one produce attempt holds, and what it gives each."""

    offers: list[Offer] = field(default_factory=list)


class HandOffs:
    """The idle-waiting pulls of this process, per (topic, group), oldest first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[Pair, dict[Offer, None]] = {}

    # --- the waiting pull's side ---------------------------------------------------------

    async def wait(
        self, pair: Pair, principal: Principal, consumer: str, limit: int, wake: LoopEvent, timeout: float
    ) -> list[Message]:
        """Wait on `wake` up to `timeout`, open to a hand-off meanwhile. Returns what was
        handed (empty after an ordinary wake-up or the timeout)."""
        offer = Offer(pair, principal, consumer, limit, wake)
        with self._lock:
            self._idle.setdefault(pair, {})[offer] = None
        try:
            await wake.wait(timeout)
            if self._withdraw(offer, LEAVING) == LEAVING:
                # A produce holds this pull: its transaction is short, and what it commits is
                # leased to this pull, so wait for it rather than leave the lease to expire.
                while offer.state == LEAVING:
                    wake.clear()
                    if offer.state == LEAVING:
                        await wake.wait()
        except asyncio.CancelledError:
            self._withdraw(offer, ABANDONED)
            raise
        return offer.messages if offer.state == HANDED else []

    def _withdraw(self, offer: Offer, reserved_becomes: str) -> str:
        with self._lock:
            if offer.state == IDLE:
                self._forget(offer)
                offer.state = GONE
            elif offer.state in (RESERVED, LEAVING):
                offer.state = reserved_becomes
            return offer.state

    def _forget(self, offer: Offer) -> None:
        idle = self._idle.get(offer.pair)
        if idle is not None:
            idle.pop(offer, None)
            if not idle:
                del self._idle[offer.pair]

    def waiting(self, pair: Pair) -> int:
        with self._lock:
            return len(self._idle.get(pair, ()))

    # --- the producing side --------------------------------------------------------------

    def reserve(self, reservation: Reservation, pair: Pair, count: int, biz_id: int | None) -> list[Offer]:
        """Take idle pulls of `pair`, oldest first, until they can hold `count` messages
        (fewer if fewer wait). The caller must `settle` the reservation."""
        taken: list[Offer] = []
        with self._lock:
            idle = self._idle.get(pair)
            if not idle:
                return taken
            room = 0
            for offer in idle:
                if room >= count:
                    break
                if offer.principal.may_biz(biz_id):  # else the topic moved since the pull began
                    taken.append(offer)
                    room += offer.limit
            for offer in taken:
                del idle[offer]
                offer.state = RESERVED
            if not idle:
                del self._idle[pair]
        reservation.offers.extend(taken)
        return taken

    def settle(self, reservation: Reservation, committed: bool) -> list[Offer]:
        """After the produce's transaction: on commit each held pull gets its messages; on
        failure each goes back to waiting. Returns the pulls cancelled meanwhile whose
        messages were committed (for the caller to release)."""
        abandoned: list[Offer] = []
        woken: list[Offer] = []
        returned: dict[Pair, dict[Offer, None]] = {}
        with self._lock:
            for offer in reservation.offers:
                if offer.state == ABANDONED:
                    offer.state = GONE
                    if committed and offer.messages:
                        abandoned.append(offer)
                elif committed:
                    offer.state = HANDED
                    woken.append(offer)
                    metrics.handed_off.labels(*offer.pair).inc(len(offer.messages))
                elif offer.state == LEAVING:
                    offer.messages, offer.state = [], GONE
                    woken.append(offer)
                else:  # still waiting: open to the next produce, ahead of those who came later
                    offer.messages, offer.state = [], IDLE
                    returned.setdefault(offer.pair, {})[offer] = None
            for pair, offers in returned.items():
                self._idle[pair] = offers | self._idle.get(pair, {})
        for offer in woken:
            offer.wake.set()
        reservation.offers.clear()
        return abandoned


handoffs = HandOffs()


def reserved_shares(offers: list[Offer], rows: list[Any]) -> list[tuple[Offer, list[Any]]]:
    """`rows` dealt to `offers` in order, each up to its limit (as a combined claim deals)."""
    shares, start = [], 0
    for offer in offers:
        share = rows[start:start + offer.limit]
        if share:
            shares.append((offer, share))
        start += offer.limit
    return shares
