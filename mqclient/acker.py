"""Batched acks: results from finished handlers leave in one call, a few milliseconds later.

Acking one message per call caps a consumer at roughly the broker's request rate; batching
caps it at the database's. After the first result the acker waits for others to join while
they keep coming: until ``max_batch`` are ready, ``linger`` seconds have passed, or none came
for ``quiet`` seconds. A busy consumer's acks then carry ~60 results instead of ~40 (each ack
request saved is ~4 ms of broker CPU), while a lone result still leaves within ``quiet``, so
an idle consumer's ack does not land on the broker just as the next message arrives. A crash
repeats at most ``linger`` seconds of results (delivery is at least once).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from mqclient.delivery import Result
from mqclient.errors import InvalidRequest, MQClientError
from mqclient.message import AckOutcome, parse_time
from mqclient.transport import Transport

logger = logging.getLogger("mqclient.acker")

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
        linger: float = 0.02,
        quiet: float = 0.005,
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

    def _take(self) -> list[Result] | None:
        with self._cond:
            while not self._queue:
                if self._stopped:
                    return None
                self._cond.wait()
            until = time.monotonic() + self.linger
            while len(self._queue) < self.max_batch:
                now = time.monotonic()
                remaining = min(until, self._last_result + self.quiet) - now
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            batch = [self._queue.popleft() for _ in range(min(self.max_batch, len(self._queue)))]
            self._sending += len(batch)
            return batch

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
        results = []
        for result in batch:
            item: dict[str, Any] = {
                "id": result.delivery.message.id,
                "status": result.status,
                "log": result.log,
            }
            if not result.retry and self._retry_field:
                item["retry"] = False
            results.append(item)
        return {"consumer": self.consumer_id, "results": results}

    def _send(self, batch: list[Result]) -> None:
        try:
            try:
                answer = self.transport.call(
                    "POST", "/api/v1/ack", json=self._body(batch), deadline=self.deadline
                )
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
        entries = list((answer or {}).get("results") or [])
        by_id = {int(entry["id"]): entry for entry in entries if "id" in entry}
        for result in batch:
            entry = by_id.get(result.delivery.message.id, {})
            outcome = AckOutcome(
                id=result.delivery.message.id,
                outcome=str(entry.get("outcome", "unknown")),
                effect_time=parse_time(entry.get("effect_time")),
            )
            self.on_outcome(result, outcome, None)
