"""Registry membership: heartbeats that keep this consumer online and refresh the broker list.

The broker counts a consumer gone after three missed heartbeats, and uses the registry both to
place consumers (``rank``/``total``) and to decide which groups a broadcast reaches. The answer
also lists the live brokers, which is how the transport learns about brokers it was not told of.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from mqclient.errors import MQClientError
from mqclient.transport import Transport

logger = logging.getLogger("mqclient.registry")


class Heartbeat:
    """Registers ``consumer_id`` with its subscriptions and keeps it registered."""

    def __init__(
        self,
        transport: Transport,
        consumer_id: str,
        subscriptions: list[dict[str, str]],
        *,
        default_interval: float = 10.0,
    ) -> None:
        self.transport = transport
        self.consumer_id = consumer_id
        self.subscriptions = subscriptions
        self.interval = default_interval
        self.placement: dict[tuple[str, str], dict[str, Any]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mqclient-heartbeat", daemon=True)

    def beat(
        self, *, deadline: float | None = None, should_stop: Callable[[], bool] | None = None
    ) -> dict[str, Any]:
        """Send one heartbeat; adopt the interval and broker list it answers."""
        answer = (
            self.transport.call(
                "POST",
                "/api/v1/registry/consumers",
                json={"consumer": self.consumer_id, "subscriptions": self.subscriptions},
                deadline=deadline,
                should_stop=should_stop or self._stop.is_set,
            )
            or {}
        )
        interval = answer.get("heartbeat_seconds")
        if isinstance(interval, int | float) and interval > 0:
            self.interval = float(interval)
        brokers = answer.get("brokers")
        if isinstance(brokers, list) and brokers:
            self.transport.update_brokers(brokers)
        for item in answer.get("subscriptions") or []:
            key = (str(item.get("topic")), str(item.get("group")))
            if self.placement.get(key) != item:
                logger.info(
                    "subscription %s/%s: mode %s, rank %s of %s",
                    key[0],
                    key[1],
                    item.get("mode"),
                    item.get("rank"),
                    item.get("total"),
                    extra={
                        "topic": key[0],
                        "group": key[1],
                        "mode": item.get("mode"),
                        "rank": item.get("rank"),
                        "total": item.get("total"),
                    },
                )
            self.placement[key] = item
        return answer

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        # Beating at the broker's interval leaves room for two lost beats before we count as
        # gone; a failed beat is simply tried again at the next tick.
        while not self._stop.wait(self.interval):
            try:
                self.beat(deadline=self.interval)
            except MQClientError as exc:
                logger.warning("heartbeat failed: %s", exc)

    def leave(self) -> None:
        """Stop beating and remove this consumer from the registry."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        try:
            self.transport.call(
                "DELETE",
                f"/api/v1/registry/consumers/{quote(self.consumer_id, safe=':')}",
                deadline=5.0,
            )
        except MQClientError as exc:
            logger.warning("leaving the registry failed (it will expire): %s", exc)
