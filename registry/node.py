"""This broker process's background loop: lease recovery, and heartbeats into the registry.

Started by the ASGI lifespan (one per server process). Every broker process runs it each
MQ_LEASE_RECOVERY_SECONDS, so expired leases come back within about that long even when
nobody pulls their group and no Celery worker runs; several processes doing it at once is
safe (SKIP LOCKED). A process with an advertised URL also heartbeats each round, with the
number of long-polls waiting in it.
"""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.db import close_old_connections, connection

from registry.services import broker_heartbeat, broker_identity, broker_leave

logger = logging.getLogger(__name__)

RECOVERY_BATCH = 500


class BrokerNodeLoop:
    def __init__(self, url: str = "") -> None:
        self.identity = broker_identity(url) if url else None
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
            if self.identity is not None:
                broker_leave(node_id=self.identity["node_id"])
        except Exception as exc:  # noqa: BLE001 - best effort on the way out
            logger.warning("could not leave the registry: %s", exc)
        finally:
            connection.close()

    def _run(self) -> None:
        from messages.delivery.lifecycle import leases_recover
        from mqcenter.longpoll import parked_pulls

        while not self._stop.is_set():
            try:
                close_old_connections()
                if self.identity is not None:
                    broker_heartbeat(**self.identity, waiting_pulls=parked_pulls())
                while leases_recover(limit=RECOVERY_BATCH) == RECOVERY_BATCH and not self._stop.is_set():
                    pass
            except Exception as exc:  # noqa: BLE001 - the database may be down; keep trying
                logger.warning("broker node loop: %s", exc)
                connection.close()
            self._stop.wait(settings.MQ_LEASE_RECOVERY_SECONDS)
