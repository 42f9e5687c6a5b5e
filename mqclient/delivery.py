"""One pulled message's life inside the runner, and the result a handler produced for it."""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from mqclient.consumer import ConsumerSpec
from mqclient.message import Message


class Handling(Protocol):
    """What a delivery knows of the subscription handling it (`mqclient.subscription`)."""

    spec: ConsumerSpec

    def time_out(self, delivery: Any) -> None: ...

#: Assume the answer reached us this long after the broker started the lease.
LEASE_SAFETY_MARGIN = 0.5

#: Shortest lease extension asked for. A message with a 1 s timeout would otherwise need an
#: extend call every half second, and one slow call would lose it; a crashed consumer's
#: messages still come back within seconds.
MIN_EXTEND_SECONDS = 5


class State(enum.Enum):
    READY = "ready"  # pulled, waiting for a free slot (only with prefetch)
    RUNNING = "running"  # the handler is executing
    FINISHED = "finished"  # the handler returned or raised; the result is being acked
    TIMED_OUT = "timed_out"  # failed for its timeout; the thread may still run, result discarded
    RELEASED = "released"  # handed back unstarted at shutdown
    ABANDONED = "abandoned"  # still running when the shutdown grace ran out


@dataclass(eq=False)
class Delivery:
    """A leased message, tracked from the pull until its result is acked.

    Times are ``time.monotonic()``. ``lease_deadline`` is our conservative local estimate of
    when the broker's lease ends; the lease keeper extends it well before.
    """

    message: Message
    subscription: Handling
    received_at: float
    lease_seconds: int  # how long each extension asks for
    lease_deadline: float
    timeout: float
    started_at: float | None = None
    state: State = State.READY
    holds_slot: bool = False
    stale: bool = False
    ack_pending: bool = False
    extra: dict[str, object] = field(default_factory=dict)

    @classmethod
    def received(
        cls, message: Message, subscription: Handling, *, timeout: float | None
    ) -> Delivery:
        """Estimate the lease without trusting our wall clock more than the broker's.

        The lease derives from ``timeout_seconds``; if ``lease_expires_at`` says it ends sooner
        (by our clock), believe the sooner one. A clock skewed either way can only make us
        extend earlier, never later.
        """
        now = time.monotonic()
        lease = max(1, int(message.timeout_seconds))
        remaining = float(lease)

        if message.lease_expires_at is not None:
            wall = (message.lease_expires_at - datetime.now(UTC)).total_seconds()
            if 0 < wall < remaining:
                remaining = wall
        return cls(
            message=message,
            subscription=subscription,
            received_at=now,
            lease_seconds=max(lease, MIN_EXTEND_SECONDS),
            lease_deadline=now + remaining - LEASE_SAFETY_MARGIN,
            timeout=float(timeout if timeout is not None else message.timeout_seconds),
        )

    @property
    def duration(self) -> float:
        """Seconds the handler has run (or ran), 0 if it never started."""
        return 0.0 if self.started_at is None else time.monotonic() - self.started_at


@dataclass(frozen=True)
class Result:
    """What to tell the broker about one delivery."""

    delivery: Delivery
    status: str  # "SUCCESS", "FAIL" or "RETRY" (a snooze)
    log: str
    retry: bool = True  # False: fail permanently (the server's "retry": false extension)
    duration: float = 0.0
    delay_seconds: float | None = None  # RETRY: deliver again after this, no retry spent
