"""This broker process as a registry member: heartbeats and the background lease sweep.

Started by the ASGI lifespan (one per server process). Everything it does is also safe
when several broker processes do it at once.
"""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.db import close_old_connections, connection

from registry.services import broker_heartbeat, broker_identity, broker_leave

logger = logging.getLogger(__name__)

SWEEP_SECONDS = 1.0


class BrokerNodeLoop:
    def __init__(self, url: str) -> None:
        self.identity = broker_identity(url)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="mq-broker-node", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            broker_leave(node_id=self.identity["node_id"])
        except Exception as exc:  # noqa: BLE001 - best effort on the way out
            logger.warning("could not leave the registry: %s", exc)
        finally:
            connection.close()

    def _run(self) -> None:
        from messages.services import leases_recover

        beats_every = max(1, int(settings.MQ_HEARTBEAT_SECONDS / SWEEP_SECONDS))
        tick = 0
        while not self._stop.is_set():
            try:
                close_old_connections()
                if tick % beats_every == 0:
                    broker_heartbeat(**self.identity)
                # Expired leases come back even when nobody pulls their group.
                while leases_recover(limit=500) == 500 and not self._stop.is_set():
                    pass
            except Exception as exc:  # noqa: BLE001 - the database may be down; keep trying
                logger.warning("broker node loop: %s", exc)
                connection.close()
            tick += 1
            self._stop.wait(SWEEP_SECONDS)
