"""Batched acks: results from finished handlers leave together, a few milliseconds later.

Acking one message per call caps a consumer at roughly the broker's request rate; batching
caps it at the database's. After the first result the acker waits for others to join while
they keep coming: until ``max_batch`` are ready, ``linger`` seconds have passed, or none came
for ``quiet`` seconds. Meanwhile the next pull may carry them (``take_for_pull``: a pull takes
the consumer's acks along, an extension of API.md), so a busy consumer makes one request per
batch instead of two. For that, ``linger`` outlasts a busy subscription's pull cycle (a buffer
of 100 refilled every ~60-150 ms on 2 loaded cores), and while a pull that carries results is
out the quiet does not count: its answer is the handlers' next work. In `python -m bench e2e`
(4 SDK processes, buffers of 100) that makes 0.33 acks of their own per 100 messages beside
1.28 pulls, against 1.75 acks when no pull carries them. A lone result, with the puller in a
long-poll, leaves within ``quiet``. A crash repeats at most ``linger`` seconds of results (delivery is
at least once).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from mqclient.delivery import Result
from mqclient.errors import InvalidRequest, MQClientError
from mqclient.message import AckOutcome, parse_time
from mqclient.transport import Transport

logger = logging.getLogger("mqclient.acker")

_RESULT_FIELD = re.compile(r"^results\[(\d+)\]")

OutcomeCallback = Callable[[Result, AckOutcome | None, BaseException | None], None]


class Acker:
    """Collects :class:`Result` objects and sends them to ``POST /api/v1/ack`` in batches."""

    def __init__(
        self,
        transport: Transport,
        consumer_id: str,
        on_outcome: OutcomeCallback,
        *,
        max_batch: int = 200,
        linger: float = 0.25,
        quiet: float = 0.05,
        deadline: float = 60.0,
    ) -> None:
        self.transport = transport
        self.consumer_id = consumer_id
        self.on_outcome = on_outcome
        self.max_batch = max_batch
        self.linger = linger
        self.quiet = quiet
        self.deadline = deadline
        self._queue: deque[Result] = deque()
        self._last_result = 0.0  # monotonic time of the latest submit
        self._sending = 0
        self._cond = threading.Condition()
        self._stopped = False
        self._retry_field = True  # cleared if the broker rejects the "retry" extension
        self.pulls_carry = True  # cleared if the broker ignores the acks a pull carries
        self._carrying = 0  # pulls out now that carry results
        self._thread = threading.Thread(target=self._run, name="mqclient-acker", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def submit(self, result: Result) -> None:
        with self._cond:
            self._queue.append(result)
            self._last_result = time.monotonic()
            # The sender waits for the first result, then lingers for a full batch: wake it
            # for those two, not for every result in between.
            if len(self._queue) == 1 or len(self._queue) >= self.max_batch:
                self._cond.notify_all()

    def flush(self, timeout: float) -> bool:
        """Wait until every submitted result was sent (or given up on); False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._queue or self._sending:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def stop(self, timeout: float = 10.0) -> None:
        self.flush(timeout)
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._thread.join(timeout)

    def take_for_pull(self) -> list[Result]:
        """The results waiting to leave, for a pull to carry; the caller reports the pull's
        answer with ``pulled``."""
        with self._cond:
            if not self.pulls_carry:
                return []
            batch = self._pop_batch()
            self._carrying += 1 if batch else 0
            return batch

    def pulled(self, batch: list[Result], answer: Any) -> None:
        """A pull that carried ``batch`` came back: ``answer`` is its decoded body, or None if
        it failed. Without outcomes in the answer (the pull failed, or a broker without the
        extension ignored them) the results go back to be sent on their own."""
        if not batch:
            return
        outcomes = answer.get("results") if isinstance(answer, dict) else None
        try:
            if outcomes is None:
                with self._cond:
                    if answer is not None and self.pulls_carry:
                        logger.warning("the broker ignored the acks a pull carried; acking on its own")
                        self.pulls_carry = False
                    self._queue.extendleft(reversed(batch))
            else:
                self._report(batch, outcomes)
        finally:
            with self._cond:
                self._sending -= len(batch)
                self._carrying -= 1
                # Its answer is the handlers' next work: the quiet counts from here too.
                self._last_result = max(self._last_result, time.monotonic())
                self._cond.notify_all()

    def _pop_batch(self) -> list[Result]:
        """Up to ``max_batch`` queued results, counted as sending (lock held)."""
        batch = [self._queue.popleft() for _ in range(min(self.max_batch, len(self._queue)))]
        self._sending += len(batch)
        return batch

    def _take(self) -> list[Result] | None:
        with self._cond:
            while True:
                while not self._queue:
                    if self._stopped:
                        return None
                    self._cond.wait()
                until = time.monotonic() + self.linger
                while len(self._queue) < self.max_batch:
                    now = time.monotonic()
                    # While a pull that carries results is out, its answer brings the
                    # handlers work, and the next pull carries these: a pause is no reason
                    # to send them on their own.
                    quiet_end = until if self._carrying else self._last_result + self.quiet
                    remaining = min(until, quiet_end) - now
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
                if self._queue:  # else a pull carried them all meanwhile
                    return self._pop_batch()

    def _run(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                return
            try:
                self._send(batch)
            finally:
                with self._cond:
                    self._sending -= len(batch)
                    self._cond.notify_all()

    def _body(self, batch: list[Result]) -> dict[str, Any]:
        return {"consumer": self.consumer_id, "results": self.wire_results(batch)}

    def wire_results(self, batch: list[Result]) -> list[dict[str, Any]]:
        """``batch`` as the ``results`` of an ack (or of a pull that carries them)."""
        results = []
        for result in batch:
            item: dict[str, Any] = {
                "id": result.delivery.message.id,
                "status": result.status,
                "log": result.log,
            }
            if not result.retry and self._retry_field:
                item["retry"] = False
            if result.status == "RETRY":
                item["delay_seconds"] = result.delay_seconds or 0.0
            results.append(item)
        return results

    def _send(self, batch: list[Result]) -> None:
        try:
            try:
                answer = self._call_ack(batch)
            except InvalidRequest:
                if not self._retry_field or all(result.retry for result in batch):
                    raise
                # The broker does not know the "retry": false extension: degrade Reject to an
                # ordinary FAIL rather than lose the whole batch of results.
                logger.warning("broker rejected the ack 'retry' field; Reject acts as FAIL")
                self._retry_field = False
                answer = self.transport.call(
                    "POST", "/api/v1/ack", json=self._body(batch), deadline=self.deadline
                )
        except MQClientError as exc:
            logger.error("ack of %d result(s) failed: %s", len(batch), exc)
            for result in batch:
                self.on_outcome(result, None, exc)
            return
        self._report(batch, (answer or {}).get("results") or [])

    def _call_ack(self, batch: list[Result]) -> Any:
        """``POST /api/v1/ack``. A snooze the broker refuses (longer than its
        ``MQ_MAX_SNOOZE_SECONDS``, or a broker without snoozes) becomes an ordinary ``FAIL``
        and the batch is sent again: its other results must not be lost with it."""
        while True:
            try:
                return self.transport.call(
                    "POST", "/api/v1/ack", json=self._body(batch), deadline=self.deadline
                )
            except InvalidRequest as exc:
                match = _RESULT_FIELD.match(exc.field or "")
                index = int(match.group(1)) if match else -1
                if not 0 <= index < len(batch) or batch[index].status != "RETRY":
                    raise
                logger.warning("broker refused a snooze (%s); failing the message instead", exc.message)
                refused = batch[index]
                batch[index] = replace(
                    refused, status="FAIL", delay_seconds=None,
                    log=f"snooze of {refused.delay_seconds:g}s refused: {exc.message}",
                )

    def _report(self, batch: list[Result], outcomes: list[dict[str, Any]]) -> None:
        by_id = {int(entry["id"]): entry for entry in outcomes if "id" in entry}
        for result in batch:
            entry = by_id.get(result.delivery.message.id, {})
            outcome = AckOutcome(
                id=result.delivery.message.id,
                outcome=str(entry.get("outcome", "unknown")),
                effect_time=parse_time(entry.get("effect_time")),
            )
            self.on_outcome(result, outcome, None)
