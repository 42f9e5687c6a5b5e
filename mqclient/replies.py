"""Replies to one Producer's ``request`` calls, routed by correlation id.

All of a Producer's requests share one reply group, so a pull may return the replies of
several calls at once. Without a thread of its own: at any moment one waiting call per reply
topic is the reader. It long-polls the reply group, hands each reply to the call waiting on
its correlation id, acks them, and gives the reader role up; the other calls wait on a
condition until their reply was handed to them or the role is free. A reply whose call is no
longer waiting (it timed out, or the reply came twice) is acked and dropped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from mqclient.message import Message

# pull(reply_topic, wait_seconds) -> messages; ack(messages) acknowledges them.
Pull = Callable[[str, int], list[Message]]
Ack = Callable[[list[Message]], None]

LONG_POLL_CAP = 20  # seconds one pull may wait, as the broker allows


class ReplyRouter:
    """The waiting ``request`` calls of one Producer and the replies handed to them."""

    def __init__(self, pull: Pull, ack: Ack) -> None:
        self._pull = pull
        self._ack = ack
        self._cond = threading.Condition()
        self._slots: dict[str, Message | None] = {}  # correlation id -> its reply, once here
        self._reading: set[str] = set()  # reply topics a call is pulling from right now

    def expect(self, correlation: str) -> None:
        """Open the slot before the request is produced, so no reply can come before it."""
        with self._cond:
            self._slots[correlation] = None

    def forget(self, correlation: str) -> None:
        """Close the slot: a reply coming later is dropped."""
        with self._cond:
            self._slots.pop(correlation, None)

    def wait(self, correlation: str, reply_topic: str, deadline: float) -> Message | None:
        """The reply to ``correlation`` (an ``expect``-ed slot), or None at ``deadline``."""
        try:
            while True:
                with self._cond:
                    while True:
                        reply = self._slots.get(correlation)
                        if reply is not None:
                            return reply
                        left = deadline - time.monotonic()
                        if left <= 0:
                            return None
                        if reply_topic not in self._reading:
                            self._reading.add(reply_topic)
                            break
                        self._cond.wait(left)
                self._read(reply_topic, max(0, min(int(left), LONG_POLL_CAP)))
        finally:
            self.forget(correlation)

    def _read(self, reply_topic: str, wait: int) -> None:
        got: list[Message] = []
        try:
            got = self._pull(reply_topic, wait)
        finally:
            with self._cond:
                self._reading.discard(reply_topic)
                for message in got:
                    key = message.correlation_id
                    if key is not None and key in self._slots and self._slots[key] is None:
                        self._slots[key] = message
                self._cond.notify_all()
        if got:
            self._ack(got)
