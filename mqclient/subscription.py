"""One (topic, group) inside a runner: its puller thread, its handler slots, its prefetch buffer.

Concurrency is per subscription: ``concurrency`` handlers of the same (topic, group) run at
once on this process's worker threads, fed by one long-polling puller that asks for exactly
as many messages as there are free slots (plus ``prefetch``), so the process never holds a
message it cannot start.

Timeouts: a handler past its timeout is failed at once, but a Python thread cannot be killed,
so its thread keeps running and its eventual result is discarded. Its slot is handed to the
next message (the timed-out thread becomes a "zombie") only while zombies number fewer than
``concurrency``; past that, a timed-out handler keeps its slot until its thread really ends,
which bounds the threads of a subscription at ``2 * concurrency``.

A redelivery of a message whose timed-out handler is still running in this process (the
broker retried the failure, and this process pulled it again) is not started until that
handler ends: attempts 1 and 2 of one message never run at once in one process. It waits in
the ready buffer, its lease extended, so no other consumer takes it meanwhile either.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import threading
import time
import traceback
from collections import deque
from typing import Any, Protocol

from mqclient.consumer import ConsumerSpec
from mqclient.delivery import Delivery, Result, State
from mqclient.errors import APIError, MQClientError, Reject, Snooze
from mqclient.message import Message
from mqclient.pool import WorkerPool


class Puller(Protocol):
    """What a subscription asks of the runner that wires it (`mqclient.runner.Runner`)."""

    @property
    def stopping(self) -> bool: ...

    def pull(self, sub: Subscription, max_messages: int, *, carry: bool = True) -> list[Message]: ...

    def sleep(self, seconds: float) -> None: ...

    def idle_pull(self, sub: Subscription) -> None: ...

    def track(self, deliveries: list[Delivery]) -> None: ...

    def release(self, deliveries: list[Delivery]) -> None: ...

    def submit_result(self, result: Result) -> None: ...

logger = logging.getLogger("mqclient.subscription")

#: Longest failure text sent as a trace log.
MAX_LOG_CHARS = 4000


def invoke(spec: ConsumerSpec, message: Message) -> tuple[str, str, bool, float | None]:
    """Run the handler and translate its ending into ``(status, log, retry, delay_seconds)``.

    A returned string becomes the success log; :class:`Reject` fails without retry;
    :class:`Snooze` asks for a redelivery after its delay (``RETRY``, no retry spent); any
    other exception fails with its type, text and the innermost frames as the trace log.
    """
    try:
        value = spec.handler(message)
        if inspect.isawaitable(value):
            value = asyncio.run(_awaited(value))
    except Reject as exc:
        return "FAIL", _truncate(f"rejected: {exc}" if str(exc) else "rejected"), False, None
    except Snooze as exc:
        return "RETRY", _truncate(exc.reason), True, exc.seconds
    except BaseException as exc:  # noqa: BLE001 - a handler's SystemExit must not kill the pool
        return "FAIL", failure_log(exc), True, None
    return "SUCCESS", _truncate(value) if isinstance(value, str) else "", True, None


async def _awaited(value: Any) -> Any:
    return await value


def failure_log(exc: BaseException) -> str:
    """``Type: text`` first (what an operator scans for), then the last frames."""
    head = f"{type(exc).__name__}: {exc}".rstrip(": ")
    frames = "".join(traceback.format_tb(exc.__traceback__, limit=-5))
    return _truncate(f"{head}\n{frames}" if frames else head)


def _truncate(text: str) -> str:
    return text if len(text) <= MAX_LOG_CHARS else text[: MAX_LOG_CHARS - 3] + "..."


class Subscription:
    """Pull, dispatch and account for the handlers of one (topic, group)."""

    def __init__(self, spec: ConsumerSpec, runner: Puller, *, group: str, concurrency: int) -> None:
        self.spec = spec
        self.runner = runner
        self.topic = spec.topic
        self.group = group
        self.concurrency = concurrency
        self.prefetch = spec.prefetch
        self._refill_at = max(1, (concurrency + spec.prefetch) * 3 // 4)
        self.pool = WorkerPool(f"mq-{self.topic}-{self.group}", 2 * concurrency)
        self._cond = threading.Condition()
        self._slots_used = 0
        self._zombies = 0
        # Message ids whose timed-out handler still runs here: their redelivery waits for it.
        self._zombie_ids: dict[int, int] = {}
        self._running: set[Delivery] = set()
        self._ready: deque[Delivery] = deque()
        self.peak_running = 0
        self._thread = threading.Thread(
            target=self._pull_loop, name=f"mqclient-pull-{self.topic}-{self.group}", daemon=True
        )

    # ------------------------------------------------------------------ pulling

    def start(self) -> None:
        self._thread.start()

    def capacity(self) -> int:
        """How many messages a pull may ask for now (call with the lock held)."""
        return max(0, self.concurrency - self._slots_used + self.prefetch - len(self._ready))

    def _should_pull(self) -> bool:
        """Pull once three quarters of the buffer (slots + prefetch) are free, or at once
        when nothing is ready to start. A pull per freed slot would cost the broker a request
        per handful of messages (`python -m bench e2e`, a buffer of 100: pulls of ~50 at half,
        ~78 at three quarters); the quarter still buffered keeps the handlers busy while the pull is
        out (lock held)."""
        capacity = self.capacity()
        return capacity >= self._refill_at or (capacity > 0 and not self._ready)

    def _wait_for_capacity(self) -> int:
        with self._cond:
            while not self.runner.stopping and not self._should_pull():
                self._cond.wait(1.0)
            return 0 if self.runner.stopping else self.capacity()

    def _pull_loop(self) -> None:
        pause = 0.0
        while not self.runner.stopping:
            wanted = self._wait_for_capacity()
            if wanted <= 0:
                break
            try:
                messages = self.runner.pull(self, wanted)
            except APIError as exc:
                # A 4xx (bad token, missing scope) will not fix itself soon: say so loudly and
                # try again slowly, so fixing the token on the broker side heals the consumer.
                pause = 30.0 if exc.status < 500 else min(max(pause * 2, 1.0), 30.0)
                logger.error("pull %s/%s failed: %s", self.topic, self.group, exc)
                self.runner.sleep(pause)
                continue
            except MQClientError as exc:
                pause = min(max(pause * 2, 1.0), 30.0)
                logger.warning("pull %s/%s failed: %s", self.topic, self.group, exc)
                self.runner.sleep(pause)
                continue
            pause = 0.0
            if messages:
                self._accept(messages)
            else:
                self.runner.idle_pull(self)

    def _accept(self, messages: list[Message]) -> None:
        deliveries = [Delivery.received(m, self, timeout=self.spec.timeout) for m in messages]
        self.runner.track(deliveries)
        with self._cond:
            # Checked under the lock that take_unstarted() also holds, so a pull that returns
            # during shutdown cannot slip its messages past the release.
            if self.runner.stopping:
                late = deliveries
            else:
                late = []
                self._ready.extend(deliveries)
                self._fill()
        if late:
            self.runner.release(late)

    def join(self, timeout: float) -> None:
        """Wait for the puller to end (its outstanding long-poll must come back first)."""
        self.wake()
        self._thread.join(timeout)

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    # ------------------------------------------------------------------ handlers

    def _fill(self) -> None:
        """Start ready messages while slots are free (lock held)."""
        while (delivery := self._start_next()) is not None:
            self.pool.submit(functools.partial(self._execute, delivery))

    def _start_next(self) -> Delivery | None:
        """Take a slot for the next ready message, if there is one and a slot is free (lock
        held); the caller runs it."""
        if not self._ready or self._slots_used >= self.concurrency or self.runner.stopping:
            return None
        delivery = next((d for d in self._ready if d.message.id not in self._zombie_ids), None)
        if delivery is None:  # every ready one is a redelivery of a handler still running here
            return None
        self._ready.remove(delivery)
        delivery.state = State.RUNNING
        delivery.started_at = time.monotonic()
        delivery.holds_slot = True
        self._slots_used += 1
        self._running.add(delivery)
        self.peak_running = max(self.peak_running, len(self._running))
        return delivery

    def _execute(self, delivery: Delivery) -> None:
        """Run `delivery`, then, on the same thread, whatever is ready next for the slot it
        frees: a busy subscription hands no message from thread to thread."""
        following: Delivery | None = delivery
        while following is not None:
            following = self._execute_one(following)

    def _execute_one(self, delivery: Delivery) -> Delivery | None:
        status, log, retry, delay = invoke(self.spec, delivery.message)
        duration = delivery.duration
        following = None
        with self._cond:
            was = delivery.state
            if delivery.holds_slot:
                self._slots_used -= 1
                delivery.holds_slot = False
                following = self._start_next()
            elif was is State.TIMED_OUT:
                self._zombies -= 1
            if was is State.TIMED_OUT:
                self._zombie_end(delivery.message.id)
            if was is State.RUNNING:
                delivery.state = State.FINISHED
            self._running.discard(delivery)
            self._fill()
            # Wake the puller only when it may pull, and shutdown when the last handler ends:
            # not once per message.
            notify = not self._running or self._should_pull()
        if was is State.RUNNING:
            self.runner.submit_result(
                Result(delivery, status, log, retry=retry, duration=duration, delay_seconds=delay)
            )
        else:
            logger.info(
                "late result of message %s discarded (%s after %.1fs)",
                delivery.message.id,
                was.value,
                duration,
                extra={
                    "id": delivery.message.id,
                    "topic": self.topic,
                    "group": self.group,
                    "status": status,
                    "discarded": True,
                },
            )
        if notify:
            # After the result is queued, so that the pull this wakes can carry it.
            with self._cond:
                self._cond.notify_all()
        return following

    def time_out(self, delivery: Delivery) -> None:
        """Fail a handler that ran past its timeout; free its slot if zombies allow."""
        with self._cond:
            if delivery.state is not State.RUNNING:
                return
            delivery.state = State.TIMED_OUT
            self._running.discard(delivery)
            self._zombie_ids[delivery.message.id] = self._zombie_ids.get(delivery.message.id, 0) + 1
            if self._zombies < self.concurrency:
                self._slots_used -= 1
                self._zombies += 1
                delivery.holds_slot = False
                self._fill()
            self._cond.notify_all()
        duration = delivery.duration
        self.runner.submit_result(
            Result(
                delivery,
                "FAIL",
                f"timeout: handler still running after {delivery.timeout:g}s; the consumer "
                "failed it and will discard its result",
                duration=duration,
            )
        )

    def _zombie_end(self, message_id: int) -> None:
        """A timed-out handler's thread ended: its message's redelivery may start (lock held)."""
        left = self._zombie_ids.get(message_id, 0) - 1
        if left > 0:
            self._zombie_ids[message_id] = left
        else:
            self._zombie_ids.pop(message_id, None)

    # ------------------------------------------------------------------ shutdown

    def take_unstarted(self) -> list[Delivery]:
        """Remove and return the pulled messages no handler started (lock held inside)."""
        with self._cond:
            unstarted = list(self._ready)
            self._ready.clear()
            for delivery in unstarted:
                delivery.state = State.RELEASED
            self._cond.notify_all()
        return unstarted

    def wait_idle(self, deadline: float) -> bool:
        """Wait until no handler is running (timed-out zombies excepted); False at deadline."""
        with self._cond:
            while self._running:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(min(remaining, 0.5))
        return True

    def abandon_running(self) -> list[Delivery]:
        """Mark handlers still running at the end of the grace period as abandoned."""
        with self._cond:
            running = list(self._running)
            for delivery in running:
                delivery.state = State.ABANDONED
            self._running.clear()
        return running

    @property
    def running(self) -> int:
        with self._cond:
            return len(self._running)

    def subscription_body(self) -> dict[str, str]:
        return {"topic": self.topic, "group": self.group}

    def wait_for_work(self, seconds: float) -> None:
        """Sleep up to ``seconds`` unless stopping (used between empty short polls)."""
        with self._cond:
            if not self.runner.stopping:
                self._cond.wait(seconds)
