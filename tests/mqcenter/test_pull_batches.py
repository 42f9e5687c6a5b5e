"""KeyedBatches (mqcenter/pull_batches.py): one run per key at a time; what arrives during a
run is taken together by the next; errors reach every waiter of their run."""

from __future__ import annotations

import asyncio

import pytest

from mqcenter.pull_batches import KeyedBatches


async def settle() -> None:
    """Let every task that can run do so (a few passes of the event loop)."""
    for _ in range(5):
        await asyncio.sleep(0)


class Recorder:
    """A run that records its batches and, until released, holds the first one."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.release = asyncio.Event()
        self.fail_on: str | None = None

    async def run(self, items: list[str]) -> list[str]:
        self.batches.append(list(items))
        if len(self.batches) == 1:
            await self.release.wait()
        if self.fail_on in items:
            raise ValueError(f"failed on {self.fail_on}")
        return [item.upper() for item in items]


def test_those_submitted_together_run_together_up_to_the_batch_size() -> None:
    async def scenario() -> None:
        recorder = Recorder()
        recorder.release.set()
        batches = KeyedBatches(recorder.run, max_batch=3)
        # Submitted in one turn of the loop, as the pulls one wake hint resumes.
        together = [asyncio.ensure_future(batches.submit("k", item)) for item in "abcde"]
        assert await asyncio.gather(*together) == list("ABCDE")
        assert recorder.batches == [["a", "b", "c"], ["d", "e"]]

    asyncio.run(scenario())


def test_the_first_runs_alone_and_those_arriving_meanwhile_run_together() -> None:
    async def scenario() -> None:
        recorder = Recorder()
        batches = KeyedBatches(recorder.run, max_batch=3)
        first = asyncio.ensure_future(batches.submit("k", "a"))
        await settle()
        assert recorder.batches == [["a"]] and batches.running("k")
        rest = [asyncio.ensure_future(batches.submit("k", item)) for item in "bcdef"]
        await settle()
        other = asyncio.ensure_future(batches.submit("other", "z"))  # another key does not wait
        assert await other == "Z"
        recorder.release.set()
        assert await first == "A"
        assert await asyncio.gather(*rest) == list("BCDEF")
        assert recorder.batches == [["a"], ["z"], ["b", "c", "d"], ["e", "f"]]
        assert not batches.running("k")

    asyncio.run(scenario())


def test_an_error_reaches_every_waiter_of_its_run_and_the_next_run_goes_on() -> None:
    async def scenario() -> None:
        recorder = Recorder()
        recorder.fail_on = "c"
        batches = KeyedBatches(recorder.run, max_batch=2)
        first = asyncio.ensure_future(batches.submit("k", "a"))
        await settle()
        rest = [asyncio.ensure_future(batches.submit("k", item)) for item in "bcd"]
        await settle()
        recorder.release.set()
        assert await first == "A"
        results = await asyncio.gather(*rest, return_exceptions=True)
        assert [type(r) for r in results[:2]] == [ValueError, ValueError]
        assert results[2] == "D"

    asyncio.run(scenario())


def test_a_cancelled_waiter_does_not_stop_the_others() -> None:
    async def scenario() -> None:
        recorder = Recorder()
        batches = KeyedBatches(recorder.run, max_batch=10)
        first = asyncio.ensure_future(batches.submit("k", "a"))
        await settle()
        gone = asyncio.ensure_future(batches.submit("k", "b"))
        kept = asyncio.ensure_future(batches.submit("k", "c"))
        await settle()
        gone.cancel()
        recorder.release.set()
        assert await first == "A" and await kept == "C"
        with pytest.raises(asyncio.CancelledError):
            await gone
        assert recorder.batches == [["a"], ["c"]]  # nothing run for the waiter that left

    asyncio.run(scenario())
