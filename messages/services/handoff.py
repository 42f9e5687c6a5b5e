"""Hand-off: a produce gives its messages straight to pulls idle-waiting in this process.

Without it, a message produced for an idle consumer costs two transactions in a row: the
produce's insert, then (after a wake-up) the woken pull's claim, which reads the row back,
leases it (and then also wrote its PULLED trace). Measured on 2 cores (session 7), the claim was about
2.5 ms of the ~8.7 ms delivery latency, and a produce of 1,000 messages to 1,000 waiting
pulls spent ~250 ms in the rounds of claims behind it. Here the produce inserts the message
already leased to a waiting pull (the row holds that "pulled" trace event, with the pull's
rank/total, as a claim's row does: `Message.pulled_at`), and the pull answers from memory
once the insert commits.

What may be handed: a fresh (not a dedup repeat), due message of a queue-mode group whose
topic is not paused. Serial and sharded groups keep their claims, whose ordering rules need
the database's view of the group. The pulls that take part are the fast path's coroutines
(`messages_pull_async`); a pull waiting on a thread (`MQ_FAST_PATH=0`, or a request the fast
path leaves to Django) is woken and claims as before.

Across broker processes (REDIS_URL set): a waiting pull lists a ticket in a Redis list per
(topic, group), and a produce in any process takes tickets, oldest first, with one atomic
script. Without this, a produce reached only the pulls of its own process: with two broker
processes, half of the idle consumers were woken to claim instead (session 8 measured
delivery latency p50 7.1 ms that way against 4.2 ms handed off). The produce inserts the
messages leased to the ticket's consumer, as for a pull of its own, and after the commit
publishes them to the pull's process on that process's own channel (registry/wakeups.py),
which answers from them. A produce takes the waiting pulls of its own process first, in
memory, and withdraws their tickets after the fact (on the event loop, while its INSERT
runs): the take was a Redis round trip on every hand-off's path, ~0.3-0.45 ms of a ~2-3 ms
delivery on an idle machine (session 16, where a round trip to a sleeping Redis cost ~0.35
ms against 0.03 back to back). Taking a ticket from the board is the reservation for pulls
of other processes; the take leaves the tickets of the producing process alone. Tickets expire
with their pull's wait, and the script skips tickets of a process whose "alive" key in
Redis lapsed (it died). Without Redis, or while this process's subscriber is disconnected,
pulls wait in memory, open to produces of this process only.

Nothing is lost on any path:
- A pull is reserved under a lock before the insert, so no two produces hand to one pull.
- If the produce's transaction fails, its reserved pulls go back to waiting (or, if their
  wait ended meanwhile, return empty): nothing was stored.
- A pull whose wait ends while a produce holds it waits for that produce's outcome (one
  short transaction) and answers with what it was handed.
- A pull cancelled (its client went away) while a produce holds it: once the produce
  commits, its messages are released at once (NEW again, no attempt spent), as a consumer
  releases what it will not start. Cancelled after it was handed its messages, before it
  answered: released too.
- A pull answered but never received: the lease expires and recovery redelivers, as for
  any claimed message.
- A ticket taken by a produce in another process: the pull learns the outcome from that
  process's publish. If the wait ends first, withdrawing the ticket fails, and the pull waits
  up to OUTCOME_SECONDS for the outcome; what arrives later (or for a cancelled pull) is
  released. If the publish never comes (the producing process died after its commit), the
  pull answers empty and the leased messages come back when their lease expires.
- A ticket of a process that died: its channel has no subscriber from that moment, so the
  publish reaches nobody and the producing process releases the messages at once (as it
  does when the publish fails: Redis down).
- A pull taken in memory by a produce of its own process whose ticket a produce in another
  process took before it was withdrawn: the pull answers with the first; what the other
  sends is released at once (the pull is remembered until its ticket has expired).
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import logging
import operator
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from django.conf import settings
from django.db import close_old_connections, connection

from messages.models import Message
from messages.services.acks import messages_release
from mqcenter.core import metrics
from mqcenter.core.auth import Principal
from registry.wakeups import CHANNEL, LoopEvent, alive_key, wake_all, wakeup_hub

logger = logging.getLogger(__name__)

Pair = tuple[str, str]

# An offer's life: IDLE (waiting, may be reserved) -> RESERVED (a produce holds it) ->
# HANDED (committed; `messages` is its answer). LEAVING: reserved when its wait ended, it
# waits for the outcome. ABANDONED: reserved when its pull was cancelled. GONE: withdrawn.
IDLE, RESERVED, LEAVING, ABANDONED, HANDED, GONE = "idle", "reserved", "leaving", "abandoned", "handed", "gone"

#: How long a pull whose ticket a produce in another process took waits for that produce's
#: outcome once its own wait is over. A produce transaction is milliseconds; a pull that
#: gives up answers empty, and what arrives later is released (NEW again, no attempt spent).
OUTCOME_SECONDS = 2.0
#: How long produces leave the board alone after Redis failed them.
RETRY_SECONDS = 5.0
#: How long a pull that stopped waiting is remembered, so that a hand-off arriving late is
#: released at once rather than left to its lease's expiry.
LATE_SECONDS = 60.0
#: A listing tells every process that its (topic, group) may hold tickets until the pull's
#: wait ends and this much more; a process announces a pair again only after that, so a
#: thousand pulls that start waiting at once make one notice.
ANNOUNCE_SECONDS = 5.0


class Offer:
    """A waiting pull, open to a hand-off. `node` is None for a pull of this process, else the
    process (its wake-up hub's origin) where a pull taken from the board waits."""

    __slots__ = ("consumer", "forget_at", "id", "limit", "listed", "messages", "node", "pair", "principal",
                 "state", "ticket", "ticket_ends", "wake")

    def __init__(self, pair: Pair, principal: Principal | None, consumer: str, limit: int,
                 wake: LoopEvent | None, *, node: str | None = None, offer_id: int = 0) -> None:
        self.pair, self.principal, self.consumer, self.limit, self.wake = pair, principal, consumer, limit, wake
        self.node, self.id = node, offer_id
        self.state = IDLE
        self.listed = False
        self.forget_at = 0.0
        self.messages: list[Message] = []
        self.ticket, self.ticket_ends = "", 0.0  # a listed pull's, as on the board


@dataclass
class Reservation:
    """The pulls one produce attempt holds, and what it gives each."""

    offers: list[Offer] = field(default_factory=list)


class HandOffs:
    """The idle-waiting pulls of this process: in memory per (topic, group), oldest first,
    and, with Redis, the ones listed on the board (by offer id)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[Pair, dict[Offer, None]] = {}
        self._listed: dict[int, Offer] = {}
        self._listed_by_pair: dict[Pair, dict[int, Offer]] = {}  # the same, per pair, oldest first
        self._late: dict[int, Offer] = {}  # stopped waiting; a hand-off may still arrive
        # Taken in memory by a produce here, each with when to forget it: its ticket may
        # still be on the board, and what another process hands it is released.
        self._served: dict[int, tuple[Offer, float]] = {}
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()

    # --- the waiting pull's side ---------------------------------------------------------

    async def wait(
        self, pair: Pair, principal: Principal, consumer: str, limit: int, wake: LoopEvent, timeout: float
    ) -> list[Message]:
        """Wait on `wake` up to `timeout`, open to a hand-off meanwhile. Returns what was
        handed (empty after an ordinary wake-up or the timeout)."""
        board = offer_board()
        if board is not None and board.receiving():
            return await self._wait_listed(board, Offer(pair, principal, consumer, limit, wake,
                                                        offer_id=next(self._ids)), timeout)
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
            if self._withdraw(offer, ABANDONED) == HANDED:
                _release_in_background([offer])  # handed, never answered
            raise
        return offer.messages if offer.state == HANDED else []

    async def _wait_listed(self, board: OfferBoard, offer: Offer, timeout: float) -> list[Message]:
        wake = offer.wake
        assert wake is not None
        offer.ticket_ends = time.time() + timeout
        ticket = offer.ticket = board.ticket(offer, expires=offer.ticket_ends)
        with self._lock:
            self._purge_late()
            self._listed[offer.id] = offer
            self._listed_by_pair.setdefault(offer.pair, {})[offer.id] = offer
        try:
            try:
                await board.list(offer.pair, ticket, timeout)
                offer.listed = True
            except Exception as exc:  # noqa: BLE001 - Redis is not on the durability path
                logger.warning("could not list a waiting pull for hand-offs (%s); it waits unlisted", exc)
                with self._lock:
                    if offer.state == IDLE:  # the ticket may be in all the same: release what comes
                        self._make_late(offer, GONE)
            await wake.wait(timeout)
            if offer.state == IDLE:
                try:
                    withdrawn = await board.withdraw(offer.pair, ticket)
                except Exception as exc:  # noqa: BLE001 - taken or not: the outcome tells
                    logger.warning("could not withdraw a hand-off ticket (%s)", exc)
                    withdrawn = False
                with self._lock:
                    if offer.state == IDLE:
                        offer.state = GONE if withdrawn else LEAVING
                        if withdrawn:
                            self._unlist(offer.id)
            if offer.state in (RESERVED, LEAVING):
                await self._await_outcome(offer)
        except asyncio.CancelledError:
            self._abandon_listed(board, offer, ticket)
            raise
        return offer.messages if offer.state == HANDED else []

    async def _await_outcome(self, offer: Offer) -> None:
        """A produce took this pull's ticket: wait for what it commits, a bounded while when
        that produce runs in another process (it may have died)."""
        wake = offer.wake
        assert wake is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + OUTCOME_SECONDS
        while offer.state in (RESERVED, LEAVING):
            wake.clear()
            if offer.state not in (RESERVED, LEAVING):
                break
            remaining = deadline - loop.time()
            if remaining <= 0:
                with self._lock:
                    if offer.state in (RESERVED, LEAVING):
                        self._make_late(offer, GONE)
                logger.warning("no hand-off outcome for pull of %s/%s within %.0fs; answering empty",
                               *offer.pair, OUTCOME_SECONDS)
                return
            await wake.wait(remaining)

    def _abandon_listed(self, board: OfferBoard, offer: Offer, ticket: str) -> None:
        """The pull was cancelled (its client went away): whatever is handed to it from now on
        is released. Its ticket is withdrawn in the background."""
        with self._lock:
            was = offer.state
            if was in (IDLE, RESERVED, LEAVING):
                self._make_late(offer, ABANDONED)
        if was == HANDED:
            _release_in_background([offer])  # handed, never answered
        elif was == IDLE:
            task = asyncio.get_running_loop().create_task(self._withdraw_abandoned(board, offer, ticket))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _withdraw_abandoned(self, board: OfferBoard, offer: Offer, ticket: str) -> None:
        try:
            if await board.withdraw(offer.pair, ticket):
                with self._lock:
                    self._late.pop(offer.id, None)
        except Exception as exc:  # noqa: BLE001 - a late hand-off is still released
            logger.warning("could not withdraw a cancelled pull's hand-off ticket (%s)", exc)

    def _make_late(self, offer: Offer, state: str) -> None:
        """Stop waiting for `offer`, but remember it a while for a hand-off still under way
        (lock held)."""
        offer.state = state
        self._unlist(offer.id)
        offer.forget_at = time.monotonic() + LATE_SECONDS
        self._late[offer.id] = offer

    def _purge_late(self) -> None:
        if self._late or self._served:
            now = time.monotonic()
            for offer_id in [i for i, o in self._late.items() if o.forget_at < now]:
                del self._late[offer_id]
            for offer_id in [i for i, (_, forget_at) in self._served.items() if forget_at < now]:
                del self._served[offer_id]

    def _unlist(self, offer_id: int) -> Offer | None:
        """Take a pull off this process's listed ones (lock held)."""
        offer = self._listed.pop(offer_id, None)
        if offer is not None:
            of_pair = self._listed_by_pair.get(offer.pair)
            if of_pair is not None:
                of_pair.pop(offer_id, None)
                if not of_pair:
                    del self._listed_by_pair[offer.pair]
        return offer

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
        """Pulls of this process open to a hand-off (listed ones once their ticket is in)."""
        with self._lock:
            listed = sum(1 for o in self._listed_by_pair.get(pair, {}).values() if o.state == IDLE and o.listed)
            return len(self._idle.get(pair, ())) + listed

    def on_direct(self, payload: bytes) -> None:
        """A produce in another process settled pulls of ours it took from the board: each
        entry is [offer id, messages] (None: that produce failed, so go round again)."""
        released: list[Offer] = []
        woken: list[Offer] = []
        sent = json.loads(payload)
        fields = sent.get("fields")  # absent from a process before session 12: positional
        for offer_id, wire in sent["handed"]:
            messages = None if wire is None else messages_from_wire(fields, wire)
            with self._lock:
                served, _ = self._served.get(offer_id, (None, 0.0))
                if served is not None:
                    # A produce here took this pull in memory before its ticket was withdrawn:
                    # the pull answers with that produce's messages, and these go back.
                    if messages:
                        stand_in = Offer(served.pair, served.principal, served.consumer, 0, None)
                        stand_in.messages = messages
                        released.append(stand_in)
                    continue
                offer = self._unlist(offer_id) or self._late.pop(offer_id, None)
                if offer is None:
                    if messages:
                        logger.warning("hand-off of %d message(s) for a forgotten pull; they come back "
                                       "when their lease expires", len(messages))
                    continue
                if offer.state in (IDLE, RESERVED, LEAVING):
                    offer.messages, offer.state = (messages, HANDED) if messages else ([], GONE)
                    woken.append(offer)
                elif messages:  # cancelled, or it gave up waiting for this outcome
                    offer.messages = messages
                    released.append(offer)
        wake_all(offer.wake for offer in woken if offer.wake is not None)
        if released:
            _release_in_background(released)

    # --- the producing side --------------------------------------------------------------

    def reserve(self, reservation: Reservation, pair: Pair, count: int, biz_id: int | None) -> list[Offer]:
        """Take idle pulls of `pair`, oldest first, until they can hold `count` messages
        (fewer if fewer wait): this process's listed ones, in memory (their tickets are
        withdrawn afterwards), its unlisted ones, then tickets from the board. The caller
        must `settle` the reservation."""
        taken: list[Offer] = []
        served: list[Offer] = []
        room = 0
        with self._lock:
            listed = self._listed_by_pair.get(pair)
            if listed:
                for offer in listed.values():
                    if room >= count:
                        break
                    if offer.state == IDLE and offer.listed and offer.principal is not None \
                            and offer.principal.may_biz(biz_id):
                        served.append(offer)
                        room += offer.limit
                now, clock = time.monotonic(), time.time()
                for offer in served:
                    self._unlist(offer.id)
                    offer.state = RESERVED
                    self._served[offer.id] = (offer, now + max(0.0, offer.ticket_ends - clock) + LATE_SECONDS)
                taken.extend(served)
            idle = self._idle.get(pair)
            if idle:
                for offer in idle:
                    if room >= count:
                        break
                    if offer.principal is not None and offer.principal.may_biz(biz_id):
                        # else the topic moved since the pull began
                        taken.append(offer)
                        room += offer.limit
                for offer in taken:
                    del idle[offer]
                    offer.state = RESERVED
                if not idle:
                    del self._idle[pair]
        if served:
            self._withdraw_served(pair, served)
        board = offer_board() if room < count else None
        if board is not None and board.may_hold(pair):
            # This process's tickets stay: its pulls that could be taken were, above, and the
            # rest are served ones whose withdrawal is on its way. Taken, they counted as room
            # and left pulls of other processes out whenever the take ran before the withdrawal:
            # in one burst of 1,000 on two processes (session 17), 390 messages were claimed by
            # woken pulls instead of handed.
            taken.extend(Offer(pair, None, ticket.consumer, int(ticket.limit), None,
                               node=ticket.process, offer_id=int(ticket.offer))
                         for ticket in board.take(pair, count - room, biz_id, leave=board.origin))
        reservation.offers.extend(taken)
        return taken

    def _withdraw_served(self, pair: Pair, offers: list[Offer]) -> None:
        """Withdraw the tickets of pulls taken in memory, on their event loop: the produce
        does not wait for it (it runs beside the produce's INSERT)."""
        board = offer_board()
        if board is None:
            return
        batches: dict[asyncio.AbstractEventLoop, list[Offer]] = {}
        for offer in offers:
            assert offer.wake is not None
            batches.setdefault(offer.wake.loop, []).append(offer)
        for loop, batch in batches.items():
            if not loop.is_closed():  # else the tickets expire with their waits
                asyncio.run_coroutine_threadsafe(self._withdrawn(board, pair, batch), loop)

    async def _withdrawn(self, board: OfferBoard, pair: Pair, offers: list[Offer]) -> None:
        try:
            withdrawn = await board.withdraw_many(pair, [offer.ticket for offer in offers])
        except Exception as exc:  # noqa: BLE001 - remembered until their tickets expire
            logger.warning("could not withdraw the tickets of %d pull(s) served in memory (%s)", len(offers), exc)
            return
        with self._lock:
            for offer, done in zip(offers, withdrawn, strict=True):
                if done:  # else a produce elsewhere took it: what it hands is released
                    self._served.pop(offer.id, None)

    def settle(self, reservation: Reservation, committed: bool) -> list[Offer]:
        """After the produce's transaction: on commit each held pull gets its messages; on
        failure each goes back to waiting (a listed one goes round its pull's loop again).
        Pulls of other processes learn the outcome from a publish. Returns the pulls whose
        committed messages nobody will answer with (cancelled meanwhile, or in a process
        gone), for the caller to release."""
        abandoned: list[Offer] = []
        woken: list[Offer] = []
        elsewhere: dict[str, list[Offer]] = {}
        returned: dict[Pair, dict[Offer, None]] = {}
        handed_per_pair: Counter[Pair] = Counter()  # one metric update per pair, not per pull
        with self._lock:
            for offer in reservation.offers:
                if offer.node is not None:
                    elsewhere.setdefault(offer.node, []).append(offer)
                    if committed:
                        handed_per_pair[offer.pair] += len(offer.messages)
                elif offer.state in (ABANDONED, GONE):
                    self._late.pop(offer.id, None)
                    offer.state = GONE
                    if committed and offer.messages:
                        abandoned.append(offer)
                elif committed:
                    offer.state = HANDED
                    self._unlist(offer.id)
                    woken.append(offer)
                    handed_per_pair[offer.pair] += len(offer.messages)
                elif offer.state == LEAVING or offer.id:  # listed (id > 0): it goes round again
                    offer.messages, offer.state = [], GONE
                    self._unlist(offer.id)
                    woken.append(offer)
                else:  # still waiting: open to the next produce, ahead of those who came later
                    offer.messages, offer.state = [], IDLE
                    returned.setdefault(offer.pair, {})[offer] = None
            for pair, offers in returned.items():
                self._idle[pair] = offers | self._idle.get(pair, {})
        # Pulls of other processes hear first. Waking this process's pulls first set the
        # event loop answering them, and this thread then waited for the interpreter lock
        # behind it at each step of the publish: measured (session 15, two broker
        # processes, 1,000 pulls woken by one produce), the other process heard 5-45 ms
        # after the commit instead of ~6, and its pulls' answers came last.
        for node, offers in elsewhere.items():
            times: dict[datetime, str] = {}
            handed = [[o.id, [message_to_wire(m, times) for m in o.messages] if committed else None] for o in offers]
            try:
                received = wakeup_hub().send_direct(node, json.dumps({"fields": _FIELDS, "handed": handed}))
            except Exception as exc:  # noqa: BLE001 - Redis failed: the pulls cannot hear of it
                logger.warning("could not tell %s about %d handed-off pull(s) (%s)", node, len(offers), exc)
                received = 0
            if not received and committed:
                # Nobody listens on that process's channel: it died (or lost Redis) since it
                # listed the pulls. Release their messages now rather than at lease expiry.
                for offer in offers:
                    if offer.messages:
                        offer.principal = _BROKER
                        abandoned.append(offer)
        wake_all(offer.wake for offer in woken if offer.wake is not None)
        for pair, count in handed_per_pair.items():
            metrics.handed_off.labels(*pair).inc(count)
        reservation.offers.clear()
        return abandoned


handoffs = HandOffs()

#: Who releases messages handed to a process that is gone (their pulls' tokens are there).
_BROKER = Principal(name="broker", scopes=("admin",), biz_ids=None)


def reserved_shares(offers: list[Offer], rows: list[Any]) -> list[tuple[Offer, list[Any]]]:
    """`rows` dealt to `offers` in order, each up to its limit (as a combined claim deals)."""
    shares, start = [], 0
    for offer in offers:
        share = rows[start:start + offer.limit]
        if share:
            shares.append((offer, share))
        start += offer.limit
    return shares


# --- across processes ------------------------------------------------------------------------

# A ticket: "<wait ends, epoch s>|<max messages>|<business lines, comma-separated, or *>|
# <process>|<offer id>|<consumer>" (a consumer id holds no "|" nor line break: validation).
# Plain text, not JSON, answered as one string, a ticket per line: taking a thousand at once
# cost 17 ms with cjson, a reply per ticket and json.loads, and a burst is measured in
# milliseconds.
#
# Both scripts below read a list from its head in chunks and then rewrite that head once:
# the items read go (LTRIM), and those to stay are pushed back, in order. Taking or
# withdrawing a ticket from inside the list one at a time (LINDEX, LREM) walked the list each
# time: measured in session 17, a burst's take that left 500 tickets of the producing process
# in place took 4 ms instead of 1, and withdrawing those 500 tickets with one LREM each held
# Redis for ~6 ms, which the produce's take waited behind.
_REWRITE_HEAD = """
local function rewrite_head(key, read, kept)
  local ttl = redis.call('PTTL', key)
  redis.call('LTRIM', key, read, -1)
  for first = #kept, 1, -1000 do
    local batch = {}
    for i = first, math.max(1, first - 999), -1 do batch[#batch + 1] = kept[i] end
    redis.call('LPUSH', key, unpack(batch))
  end
  if #kept > 0 and ttl > 0 then redis.call('PEXPIRE', key, ttl) end
end
"""

# Take tickets from the head of a pair's list until they hold `room` messages: skip (and
# drop) tickets whose wait is over or whose process died; leave in place the tickets of
# principals that may not reach the topic's business line, and those of process ARGV[5].
_TAKE = _REWRITE_HEAD + """
local taken, kept, room, read, alive = {}, {}, 0, 0, {}
local want, now, biz, leave = tonumber(ARGV[1]), tonumber(ARGV[2]), ',' .. ARGV[3] .. ',', ARGV[5]
while room < want do
  local chunk = redis.call('LRANGE', KEYS[1], read, read + 199)
  if #chunk == 0 then break end
  for _, raw in ipairs(chunk) do
    read = read + 1
    local ends, limit, bizs, node = string.match(raw, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|')
    local live = alive[node]
    if live == nil then
      live = redis.call('EXISTS', ARGV[4] .. node) == 1
      alive[node] = live
    end
    if live and tonumber(ends) >= now then
      if node ~= leave and (bizs == '*' or (biz ~= ',,' and string.find(',' .. bizs .. ',', biz, 1, true))) then
        taken[#taken + 1] = raw
        room = room + tonumber(limit)
        if room >= want then break end
      else
        kept[#kept + 1] = raw
      end
    end
  end
end
if read > 0 then rewrite_head(KEYS[1], read, kept) end
return table.concat(taken, string.char(10))
"""

# Withdraw the tickets in ARGV; the answer is one character per ticket, "1" if it was there.
_WITHDRAW = _REWRITE_HEAD + """
local wanted, found, left, kept, read = {}, {}, #ARGV, {}, 0
for i, ticket in ipairs(ARGV) do wanted[ticket] = i end
while left > 0 do
  local chunk = redis.call('LRANGE', KEYS[1], read, read + 199)
  if #chunk == 0 then break end
  for _, raw in ipairs(chunk) do
    read = read + 1
    local i = wanted[raw]
    if i and not found[i] then
      found[i] = true
      left = left - 1
      if left == 0 then break end
    else
      kept[#kept + 1] = raw
    end
  end
end
if left < #ARGV then rewrite_head(KEYS[1], read, kept) end
local answer = {}
for i = 1, #ARGV do answer[i] = found[i] and '1' or '0' end
return table.concat(answer)
"""


class Ticket(NamedTuple):
    """A ticket as `_TAKE` answers it (text fields, as listed)."""

    ends: str
    limit: str
    business_lines: str
    process: str
    offer: str
    consumer: str


class OfferBoard:
    """The Redis lists of pulls waiting for a hand-off, one per (topic, group), shared by the
    broker processes of one database (the key names it, so deployments sharing a Redis, or
    test runs, never hand to each other)."""

    def __init__(self, url: str, namespace: str) -> None:
        import redis

        self.url = url
        self.prefix = f"mqcenter:offers:{namespace}:"
        self.origin = wakeup_hub().origin
        self._client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
        self._take = self._client.register_script(_TAKE)
        self._async: dict[int, _Pipelined] = {}
        self._down_until = 0.0
        # Until when this process last told the others that a pair may hold tickets; until
        # when a pair may hold tickets, as any process (this one included) told.
        self._announced: dict[Pair, float] = {}
        self._may_hold: dict[Pair, float] = {}
        self._heard_lock = threading.Lock()
        self._heard_since = -1.0  # time.monotonic() of the last look at the lists themselves

    def receiving(self) -> bool:
        """Whether hand-offs from other processes can reach this one now."""
        return wakeup_hub().connected

    def key(self, pair: Pair) -> str:
        return self.prefix + json.dumps(pair)

    def ticket(self, offer: Offer, *, expires: float) -> str:
        principal = offer.principal
        assert principal is not None
        bizs = "*" if principal.biz_ids is None else ",".join(map(str, sorted(principal.biz_ids)))
        return f"{expires:.3f}|{offer.limit}|{bizs}|{self.origin}|{offer.id}|{offer.consumer}"

    async def list(self, pair: Pair, ticket: str, timeout: float) -> None:
        """Put `ticket` at the tail of its pair's list and, unless done lately, tell every
        process that the pair holds tickets (in the same pipeline: no round trip more)."""
        key = self.key(pair)
        commands = self._commands()
        calls = [
            commands.call("RPUSH", key, ticket),
            commands.call("EXPIRE", key, int(timeout) + 60),  # a list nobody reads goes too
        ]
        ends = time.time() + timeout
        if ends > self._announced.get(pair, 0.0):
            notice = [*pair, ends + ANNOUNCE_SECONDS]
            self._announced[pair] = notice[2]
            self.heard(notice)
            calls.append(commands.call("PUBLISH", CHANNEL, json.dumps({"from": self.origin, "pairs": [],
                                                                      "listed": notice})))
        try:
            await asyncio.gather(*calls)
        except Exception:
            self._announced.pop(pair, None)  # the next listing announces again
            raise

    def heard(self, notice: list[Any]) -> None:
        """A "listed" notice, `[topic, group, until]`: the pair may hold tickets until then."""
        topic, group, until = notice
        pair = (str(topic), str(group))
        with self._heard_lock:
            if float(until) > self._may_hold.get(pair, 0.0):
                self._may_hold[pair] = float(until)

    def may_hold(self, pair: Pair) -> bool:
        """Whether a ticket of `pair` may be listed: a process announced one, or this process
        cannot tell (its subscriber is down). Else a produce leaves the board alone: its take
        was ~0.45 ms of every produce's time (session 10), waiting pulls or not. A notice
        still on its way when a produce looks costs that produce its hand-off, not a message:
        the pull is woken by the produce's commit and claims."""
        hub = wakeup_hub()
        if not hub.connected:
            return True
        if self._heard_since < hub.connected_at and not self._look_at_lists():
            return True
        return self._may_hold.get(pair, 0.0) >= time.time()

    def _look_at_lists(self) -> bool:
        """Notices sent before this process subscribed went unheard: once subscribed (again),
        every pair with a list is taken to hold tickets as long as a ticket can live."""
        since = time.monotonic()
        try:
            keys = list(self._client.scan_iter(f"{self.prefix}*", count=1000))
        except Exception as exc:  # noqa: BLE001 - then the take finds out
            logger.warning("could not look at the hand-off board (%s)", exc)
            return False
        until = time.time() + settings.MQ_MAX_WAIT_SECONDS + ANNOUNCE_SECONDS
        for key in keys:
            self.heard([*json.loads(key.decode()[len(self.prefix):]), until])
        self._heard_since = since
        return True

    async def withdraw(self, pair: Pair, ticket: str) -> bool:
        return bool(await self._commands().call("LREM", self.key(pair), 1, ticket))

    async def withdraw_many(self, pair: Pair, tickets: list[str]) -> list[bool]:
        """Withdraw `tickets` with one script, whose answer is one character per ticket: a
        reply per ticket cost the event loop ~20 ms for a thousand (session 16)."""
        answer = await self._commands().call("EVAL", _WITHDRAW, 1, self.key(pair), *tickets)
        return [flag == ord("1") for flag in answer]

    def take(self, pair: Pair, room: int, biz_id: int | None, *, leave: str = "") -> list[Ticket]:
        """Tickets of `pair` that can hold `room` messages (fewer if fewer wait), leaving those
        of process `leave` on the board; none while Redis fails: the produce then wakes the
        pulls instead, and does not wait on a dead Redis's timeout every time."""
        if time.monotonic() < self._down_until:
            return []
        try:
            raw = self._take(keys=[self.key(pair)],
                             args=[room, time.time(), "" if biz_id is None else str(biz_id), alive_key(""), leave])
        except Exception as exc:  # noqa: BLE001 - without hand-offs the pulls are woken
            logger.warning("could not take hand-off tickets (%s); not trying for %.0fs", exc, RETRY_SECONDS)
            self._down_until = time.monotonic() + RETRY_SECONDS
            return []
        # One reply, a ticket per line: a thousand replies cost redis-py more than the script.
        return [Ticket(*line.split("|", 5)) for line in raw.decode().splitlines()]

    def _commands(self) -> _Pipelined:
        loop = asyncio.get_running_loop()
        commands = self._async.get(id(loop))
        if commands is None or commands.loop is not loop:
            commands = self._async[id(loop)] = _Pipelined(self.url, loop)
        return commands


class _Pipelined:
    """The Redis commands of one event loop's waiting pulls, sent together on one connection:
    a thousand pulls that start waiting at once make a few pipelines. With a call each, they
    ran redis-py's connection pool out ("Too many connections") and waited unlisted."""

    def __init__(self, url: str, loop: asyncio.AbstractEventLoop) -> None:
        import redis.asyncio

        self.loop = loop
        self._client = redis.asyncio.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
        self._pending: list[tuple[tuple[Any, ...], asyncio.Future[Any]]] = []
        self._sender: asyncio.Task[None] | None = None

    async def call(self, *command: Any) -> Any:
        future = self.loop.create_future()
        self._pending.append((command, future))
        if self._sender is None:
            self._sender = self.loop.create_task(self._send())
        return await future

    async def _send(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                try:
                    async with self._client.pipeline(transaction=False) as pipe:
                        for command, _ in batch:
                            pipe.execute_command(*command)
                        results = await pipe.execute(raise_on_error=False)
                except Exception as exc:  # noqa: BLE001 - each caller decides
                    results = [exc] * len(batch)
                for (_, future), result in zip(batch, results, strict=True):
                    if future.done():
                        continue  # its caller was cancelled
                    if isinstance(result, Exception):
                        future.set_exception(result)
                    else:
                        future.set_result(result)
        finally:
            self._sender = None


_board: OfferBoard | None = None
_board_lock = threading.Lock()


def offer_board() -> OfferBoard | None:
    """The process's board, or None without Redis (the quick start: hand-offs stay in-process)."""
    global _board
    if not settings.REDIS_URL:
        return None
    if _board is None or _board.origin != wakeup_hub().origin:  # a forked child is another process
        with _board_lock:
            if _board is None or _board.origin != wakeup_hub().origin:
                db = connection.settings_dict
                namespace = hashlib.sha256(f"{db['HOST']}:{db['PORT']}/{db['NAME']}".encode()).hexdigest()[:12]
                _board = OfferBoard(settings.REDIS_URL, namespace)
                wakeup_hub().on_direct(handoffs.on_direct)
                wakeup_hub().on_listed(_board.heard)
    return _board


# What a handed message looks like on the way to the process of its pull: the model's
# fields in their order (positional construction, as `produce._handed_message` does), times
# as ISO text. The payload names the fields once: during a rolling upgrade the two processes
# may run versions whose messages have different columns (session 11 added `producer`,
# session 12 `handed_to`), and a message built positionally from another version's fields
# would fail (too many values) or be wrong.
_FIELDS = [f.attname for f in Message._meta.concrete_fields]
_FIELD_VALUES = operator.attrgetter(*_FIELDS)  # a message's values in one call, not one getattr each
_TIME_NAMES = {f.attname for f in Message._meta.concrete_fields if f.get_internal_type() == "DateTimeField"}
_TIMES = {i for i, name in enumerate(_FIELDS) if name in _TIME_NAMES}


def message_to_wire(message: Message, times: dict[datetime, str] | None = None) -> list[Any]:
    """The message's values in `_FIELDS` order. `times` remembers each distinct time's text
    across the messages of one payload: a produced batch shares its add, update and effect
    times, and formatting five times per message was ~4 us of ~6 (session 17)."""
    values = list(_FIELD_VALUES(message))
    times = {} if times is None else times
    for i in _TIMES:
        value = values[i]
        if value is not None:
            text = times.get(value)
            if text is None:
                text = times[value] = value.isoformat()
            values[i] = text
    return values


def message_from_wire(values: list[Any]) -> Message:
    for i in _TIMES:
        if i < len(values) and values[i] is not None:
            values[i] = datetime.fromisoformat(values[i])
    return Message(*values)


def messages_from_wire(fields: list[str] | None, wire: list[list[Any]]) -> list[Message]:
    """Messages as a process sent them, `fields` naming the values. Fields this version does
    not know are dropped, fields it has and the sender had not stay at their defaults. A
    sender that named no fields (before session 12) sent this version's first fields, in
    order (each version only added fields at the end)."""
    if fields is None or fields == _FIELDS:
        return [message_from_wire(values) for values in wire]
    known = set(_FIELDS)
    messages = []
    for values in wire:
        named = {name: value for name, value in zip(fields, values, strict=True) if name in known}
        for name in _TIME_NAMES.intersection(named):
            if named[name] is not None:
                named[name] = datetime.fromisoformat(named[name])
        messages.append(Message(**named))
    return messages


def release_handed(offers: list[Offer]) -> None:
    """Hand back the messages committed for pulls that will not answer with them: cancelled,
    given up waiting, or in a broker process that is gone (NEW again, no attempt spent)."""
    for offer in offers:
        assert offer.principal is not None
        try:
            messages_release(principal=offer.principal, consumer=offer.consumer, ids=[m.id for m in offer.messages])
        except Exception:  # the leases expire and recovery redelivers
            logger.warning("could not release messages handed to a pull that will not answer", exc_info=True)


def _release_in_background(offers: list[Offer]) -> None:
    """`release_handed` on a thread of its own: the caller is the event loop or the Redis
    subscriber, neither of which may wait on the database."""

    def run() -> None:
        try:
            release_handed(offers)
        finally:
            close_old_connections()
            connection.close()

    threading.Thread(target=run, name="mq-handoff-release", daemon=True).start()
