"""The lease keeper: extends leases of held messages and enforces handler timeouts.

A message's lease derives from its ``timeout_seconds``; a handler allowed to run longer (the
``@consumer(timeout=...)`` override) or a message waiting in the prefetch buffer would lose its
lease and be redelivered to someone else while we still work on it. So one loop, ticking
several times a second, extends any lease that is within a third of its length from expiry,
in one ``POST /api/v1/extend`` per lease length, and fails handlers that ran past their timeout.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from mqclient.delivery import Delivery, State
from mqclient.errors import MQClientError
from mqclient.transport import Transport

logger = logging.getLogger("mqclient.leases")


def extend_threshold(delivery: Delivery) -> float:
    """Seconds before the estimated expiry at which to extend: a third of the lease, and for
    short leases (a few seconds) up to half of it, so a slow extend call still lands in time."""
    lease = float(delivery.lease_seconds)
    return max(lease / 3.0, min(lease / 2.0, 1.0))


class LeaseKeeper:
    """Background loop over the runner's in-flight deliveries."""

    def __init__(
        self,
        transport: Transport,
        consumer_id: str,
        deliveries: Callable[[], list[Delivery]],
        on_timeout: Callable[[Delivery], None],
        *,
        tick: float = 0.2,
    ) -> None:
        self.transport = transport
        self.consumer_id = consumer_id
        self.deliveries = deliveries
        self.on_timeout = on_timeout
        self.tick = tick
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mqclient-leases", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self.tick):
            try:
                self.check()
            except Exception:  # never let one bad pass stop lease extension for good
                logger.exception("lease keeper pass failed")

    def check(self) -> None:
        """One pass: time out overdue handlers, then extend leases about to run out."""
        now = time.monotonic()
        due: dict[int, list[Delivery]] = defaultdict(list)
        for delivery in self.deliveries():
            started = delivery.started_at
            if (
                delivery.state is State.RUNNING
                and started is not None
                and now - started > delivery.timeout
            ):
                self.on_timeout(delivery)
                continue
            if delivery.state not in (State.READY, State.RUNNING) or delivery.stale:
                continue
            if delivery.lease_deadline - now < extend_threshold(delivery):
                due[delivery.lease_seconds].append(delivery)
        for seconds, batch in due.items():
            self.extend(batch, seconds)

    def extend(self, batch: list[Delivery], seconds: int) -> None:
        """Extend ``batch`` by ``seconds``; a stale answer means the lease is gone for good."""
        sent_at = time.monotonic()
        try:
            answer = self.transport.call(
                "POST",
                "/api/v1/extend",
                json={
                    "consumer": self.consumer_id,
                    "ids": [d.message.id for d in batch],
                    "seconds": seconds,
                },
                deadline=min(5.0, seconds / 2.0),
            )
        except MQClientError as exc:
            logger.warning("extending %d lease(s) failed: %s", len(batch), exc)
            return
        stale = stale_ids(answer)
        for delivery in batch:
            if delivery.message.id in stale:
                delivery.stale = True
                logger.warning(
                    "lease lost: message %s was taken back by the broker; its result will be "
                    "recorded as stale",
                    delivery.message.id,
                    extra={"id": delivery.message.id, "topic": delivery.message.topic},
                )
            else:
                # The broker set "now + seconds" after we sent: counting from sent_at is safe.
                delivery.lease_deadline = sent_at + seconds


def stale_ids(answer: Any) -> set[int]:
    """Ids the broker answered ``stale`` for.

    API.md says extend "returns the new lease_expires_at per id, or stale" without fixing the
    shape, so accept the plausible ones: ``{"results": [{"id": 1, "outcome": "stale"}, ...]}``
    (or ``"status"``, or ``"lease_expires_at": "stale"``), and ``{"leases": {"1": "stale"}}``
    or a bare ``{"1": "stale"}`` mapping.
    """
    stale: set[int] = set()
    if not isinstance(answer, dict):
        return stale
    items = answer.get("results")
    if isinstance(items, list):
        for item in items:
            if not isinstance(item, dict) or "id" not in item:
                continue
            values = (item.get("outcome"), item.get("status"), item.get("lease_expires_at"))
            if "stale" in values or item.get("stale") is True:
                stale.add(int(item["id"]))
        return stale
    leases = answer.get("leases")
    mapping: dict[Any, Any] = leases if isinstance(leases, dict) else answer
    for key, value in mapping.items():
        if value == "stale" and str(key).isdigit():
            stale.add(int(key))
    return stale
