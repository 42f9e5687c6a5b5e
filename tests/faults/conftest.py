"""Fixtures shared by the fault tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.private import PrivateRedis


@pytest.fixture
def redis_server() -> Iterator[PrivateRedis]:
    """A Redis of the test's own, which it may stop and start at will."""
    redis = PrivateRedis()
    redis.start()
    try:
        yield redis
    finally:
        redis.stop()
