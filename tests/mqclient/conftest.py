"""Fixtures for the SDK's tests: a fake broker for the unit tests (see sdk_fakebroker.py);
the real-server fixtures live in sdk_e2e.py and are used by test_sdk_e2e_*.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sdk_fakebroker import FakeBroker, FakeQueue


@pytest.fixture
def fake_queue() -> FakeQueue:
    return FakeQueue()


@pytest.fixture
def queue_broker(fake_queue: FakeQueue) -> Iterator[FakeBroker]:
    broker = FakeBroker(fake_queue.reply)
    yield broker
    broker.stop()
