"""Waiting for a condition instead of sleeping a guessed time."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(condition: Callable[[], object], *, timeout: float = 10.0, every: float = 0.02, what: str = "") -> None:
    """Return as soon as `condition()` is true; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what or condition}"
        time.sleep(every)
