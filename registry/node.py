"""This broker process's background loop: heartbeats into the registry and, only when
MQ_LEASE_RECOVERY_SECONDS is set, lease recovery.

Started by the ASGI lifespan (one per server process). A process with an advertised URL
heartbeats each round with the number of long-polls waiting in it: only the process itself
knows that number, so this timer is the process's own.

Lease recovery is beat's `retry` job (messages/maintenance/jobs.py), its one trigger. With
MQ_LEASE_RECOVERY_SECONDS > 0 the broker processes take it over instead (the `retry` job
then recovers nothing): expired leases come back within that long even with no Celery
worker, and sooner than a beat interval. Measured: an idle recovery probe costs 1.7 ms
(MariaDB, one indexed read of the RUNNING rows past their lease), so N processes at 1 s cost
N x 1.7 ms a second; several processes doing it at once is safe (SKIP LOCKED).
"""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.db import close_old_connections, connection

from registry.services import broker_heartbeat, broker_identity, broker_leave

logger = logging.getLogger(__name__)

RECOVERY_BATCH = 500
# Heartbeats when the loop does not recover leases: the registry's view of waiting pulls
# (consoles, `waiting_pulls`) is at most this old.
HEARTBEAT_EVERY = 1.0


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

        recovering = settings.MQ_LEASE_RECOVERY_SECONDS > 0
        while not self._stop.is_set():
            try:
                close_old_connections()
                if self.identity is not None:
                    broker_heartbeat(**self.identity, waiting_pulls=parked_pulls())
                while (recovering and leases_recover(limit=RECOVERY_BATCH) == RECOVERY_BATCH
                       and not self._stop.is_set()):
                    pass
            except Exception as exc:  # noqa: BLE001 - the database may be down; keep trying
                logger.warning("broker node loop: %s", exc)
                connection.close()
            self._stop.wait(settings.MQ_LEASE_RECOVERY_SECONDS if recovering else HEARTBEAT_EVERY)
