"""Offers of parked pulls (mqcenter/handoffs.py) as the long-poll waits on them: a taken offer
is waited for past the pull's own timer, a declined one leaves the pull to claim, a closed
one cannot be taken."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any

import pytest

from mqcenter import longpoll
from mqcenter.handoffs import offers
from mqcenter.longpoll import ParkedPull, _wait_then_attempt
from registry.wakeups import LoopEvent, WakeupHub

pytestmark = pytest.mark.django_db  # the attempt closes old connections, as around a request

PAIR = ("t", "g")


def render(rows: list[Any]) -> bytes:
    return ",".join(rows).encode()


class Pull:
    """A parked pull whose attempts are counted; it answers the rows it is given as text."""

    def __init__(self) -> None:
        self.attempts = 0

    def parked(self) -> ParkedPull:
        def attempt(remaining: float) -> tuple[list[Any], float | None]:
            self.attempts += 1
            return ["claimed"], None

        return ParkedPull(attempt, render, PAIR, spec="spec")


def wait_in_loop(pull: Pull, seconds: float, meanwhile: Any) -> Any:
    """Run the pull's wait on an event loop while `meanwhile()` runs on another thread (as a
    produce would); answers the attempt's result."""

    async def main() -> Any:
        wake = LoopEvent(asyncio.get_running_loop())
        waited = asyncio.ensure_future(_wait_then_attempt(pull.parked(), wake, seconds, deadline=0.0))
        await asyncio.sleep(0)  # the wait has opened its offer
        side = threading.Thread(target=meanwhile)
        side.start()
        result = await waited
        await asyncio.get_running_loop().run_in_executor(None, side.join)
        return result

    return asyncio.run(main())


def test_a_taken_offer_is_waited_for_past_the_pulls_timer() -> None:
    pull = Pull()
    past_timer = threading.Event()

    def produce() -> None:
        [(offer, share)] = offers.take(PAIR, lambda spec: 1, 5)
        assert offer.spec == "spec" and share == 1
        past_timer.wait(timeout=10)  # the row's INSERT outlasts the pull's wait
        offer.fulfil(["handed"])

    def release_after_timer() -> None:
        threading.Timer(0.2, past_timer.set).start()
        produce()

    status, answer, park, _ = wait_in_loop(pull, 0.05, release_after_timer)

    assert (status, answer, park) == (200, b"handed", None)
    assert pull.attempts == 0, "the pull claimed while its hand-off was under way"


def test_a_declined_offer_leaves_the_pull_to_claim() -> None:
    pull = Pull()

    def produce() -> None:
        [(offer, _)] = offers.take(PAIR, lambda spec: 1, 1)
        offer.decline()

    status, answer, _, _ = wait_in_loop(pull, 5, produce)

    assert (status, answer) == (200, b"claimed") and pull.attempts == 1


def test_a_closed_offer_cannot_be_taken_and_a_woken_pull_is_not_offered() -> None:
    pull = Pull()
    status, _, _, _ = wait_in_loop(pull, 0.01, lambda: None)
    assert status == 200 and offers.take(PAIR, lambda spec: 1, 1) == []

    async def woken() -> Any:
        wake = LoopEvent(asyncio.get_running_loop())
        with offers.opened(PAIR, "spec", render, wake):
            wake.set()  # a wake hint came first: what woke it is for it to claim
            return offers.take(PAIR, lambda spec: 1, 1)

    assert asyncio.run(woken()) == []
    assert not offers


def test_offers_are_taken_longest_open_first_until_they_hold_the_rows() -> None:
    async def four_open() -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
        loop = asyncio.get_running_loop()
        with offers.opened(PAIR, ("a", 2), render, LoopEvent(loop)), offers.opened(PAIR, ("other line", 5), render, LoopEvent(loop)), \
                offers.opened(PAIR, ("c", 3), render, LoopEvent(loop)), offers.opened(PAIR, ("d", 1), render, LoopEvent(loop)):

            def capacity(spec: tuple[str, int]) -> int:
                return 0 if spec[0] == "other line" else spec[1]

            first = [(o.spec[0], share) for o, share in offers.take(PAIR, capacity, 4)]
            left = [(o.spec[0], share) for o, share in offers.take(PAIR, lambda spec: spec[1], 100)]
            return first, left

    first, left = asyncio.run(four_open())

    assert first == [("a", 2), ("c", 2)]
    assert left == [("other line", 5), ("d", 1)]
    assert not offers


def test_a_hint_that_comes_while_a_hand_off_is_under_way_wakes_another_waiter() -> None:
    hub = WakeupHub()  # in-process, as without Redis

    async def two_waiting() -> tuple[bool, bool]:
        loop = asyncio.get_running_loop()
        taken_pull, other_pull = LoopEvent(loop), LoopEvent(loop)
        with hub.waiter(*PAIR, taken_pull), hub.waiter(*PAIR, other_pull), \
                offers.opened(PAIR, "spec", render, taken_pull):
            [(offer, _)] = offers.take(PAIR, lambda spec: 1, 1)
            hub.notify_local([PAIR], limit=1)  # the hint of another message of the pair
            offer.decline()
            return taken_pull.is_set(), other_pull.is_set()

    assert asyncio.run(two_waiting()) == (True, True)


def test_a_pull_gives_up_on_a_produce_that_outlasts_its_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(longpoll, "HANDOFF_GRACE", 0.05)
    pull = Pull()
    fulfilled: list[bool] = []

    def slow_produce() -> None:
        [(offer, _)] = offers.take(PAIR, lambda spec: 1, 1)
        deadline = time.monotonic() + 10
        while pull.attempts == 0 and time.monotonic() < deadline:  # until the pull has given up and claimed
            time.sleep(0.005)
        fulfilled.append(offer.fulfil(["late"]))

    status, answer, _, _ = wait_in_loop(pull, 0.1, slow_produce)

    assert (status, answer) == (200, b"claimed") and pull.attempts == 1
    assert fulfilled == [False], "a produce whose pull gave up must put its rows back"


@pytest.mark.parametrize("when", ["in its wait", "past its timer, waiting for the settlement"])
def test_a_pull_cancelled_while_handed_rows_leaves_them_to_be_put_back(when: str) -> None:
    seconds = 5.0 if when == "in its wait" else 0.01

    async def cancelled() -> bool:
        wake = LoopEvent(asyncio.get_running_loop())
        waited = asyncio.ensure_future(_wait_then_attempt(Pull().parked(), wake, seconds, deadline=time.monotonic() + 5))
        await asyncio.sleep(0)  # the wait has opened its offer
        [(offer, _)] = offers.take(PAIR, lambda spec: 1, 1)
        await asyncio.sleep(0.05)  # a taken pull sleeps on until its timer; then it awaits the settlement
        assert not waited.done()
        waited.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waited
        return offer.fulfil(["late"])

    assert asyncio.run(cancelled()) is False
