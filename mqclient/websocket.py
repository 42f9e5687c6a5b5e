"""Optional WebSocket mode: push wake-ups instead of held long-polls.

With ``MQ_WEBSOCKET=1`` (and the ``websockets`` package installed) the runner keeps one
WebSocket to a broker, ``ws://<broker>/ws/v1/consumer?token=...``. It sends
``{"subscribe": [{"topic": ..., "group": ...}, ...]}``; the broker confirms with
``{"type": "subscribed", ...}`` and then pushes ``{"type": "wake", "topic", "group"}`` when a
pair has deliverable work. While subscribed, pulls do not long-poll: an empty pull waits for a
wake-up, or ``wait_seconds`` as the fallback for a lost one. No HTTP request is held open per
subscription, and a stop does not wait for an outstanding long-poll. Messages themselves are
always claimed with ``POST /api/v1/pull``; the socket carries no message data.

This is best-effort by design: if the socket cannot connect, is refused or drops, the runner
goes straight back to long-polling, which is always correct on its own.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from typing import Any, Protocol

from websockets.sync.client import ClientConnection, connect

from mqclient.config import ClientConfig
from mqclient.transport import Transport


class Subscribed(Protocol):
    """A (topic, group) the consumer pulls for (`mqclient.subscription.Subscription`)."""

    topic: str
    group: str


class Listening(Protocol):
    """What the listener needs of the runner that starts it (`mqclient.runner.Runner`)."""

    config: ClientConfig
    transport: Transport

    @property
    def subscriptions(self) -> Sequence[Subscribed]: ...

    @property
    def stopping(self) -> bool: ...

logger = logging.getLogger("mqclient.websocket")

WS_PATH = "/ws/v1/consumer"


def websocket_url(broker: str) -> str:
    """``http(s)://host`` → ``ws(s)://host/ws/v1/consumer`` (the token goes in a header)."""
    scheme, _, rest = broker.partition("://")
    ws_scheme = "wss" if scheme == "https" else "ws"
    return f"{ws_scheme}://{rest.rstrip('/')}{WS_PATH}"


class WakeupListener:
    """Keeps the WebSocket, turns wake-up events into per-subscription ``threading.Event``."""

    def __init__(self, runner: Listening) -> None:
        self.runner = runner
        self.connected = False
        self._events: dict[tuple[str, str], threading.Event] = {
            (sub.topic, sub.group): threading.Event() for sub in runner.subscriptions
        }
        self._stop = threading.Event()
        self._socket: ClientConnection | None = None
        self._thread = threading.Thread(target=self._run, name="mqclient-websocket", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.connected = False
        socket = self._socket
        if socket is not None:
            socket.close()
        for event in self._events.values():
            event.set()
        self._thread.join(5)

    # ------------------------------------------------------------------ used by pullers

    def poll_wait(self, sub: Subscribed, default: int) -> int:
        """0 (a plain pull) while pushes arrive, else the normal long-poll. Clears the event
        first, so a wake-up that lands during the pull is not lost."""
        self._events[(sub.topic, sub.group)].clear()
        return 0 if self.connected else default

    def wait(self, sub: Subscribed) -> None:
        """After an empty pull: wait for a push (or the fallback interval) if subscribed."""
        if not self.connected:
            return
        event = self._events[(sub.topic, sub.group)]
        waited = 0.0
        while waited < self.runner.config.wait_seconds and not self.runner.stopping:
            if event.wait(0.25) or not self.connected:
                return
            waited += 0.25

    # ------------------------------------------------------------------ the socket

    def _run(self) -> None:
        pause = 1.0
        while not self._stop.is_set():
            for broker in self.runner.transport.brokers:
                if self._stop.is_set():
                    return
                try:
                    self._session(broker)
                    pause = 1.0
                except Exception as exc:  # noqa: BLE001 - any failure means: long-poll for now
                    logger.info("websocket to %s unavailable: %s", broker, exc)
                finally:
                    self._disconnected()
            self._stop.wait(pause)
            pause = min(pause * 2, 30.0)

    def _session(self, broker: str) -> None:
        token = self.runner.config.token
        headers = {"Authorization": f"Bearer {token}"} if token else None
        with connect(
            websocket_url(broker), additional_headers=headers, open_timeout=5
        ) as socket:
            self._socket = socket
            pairs = [{"topic": topic, "group": group} for topic, group in self._events]
            socket.send(json.dumps({"subscribe": pairs}))
            # Pushes are trusted only once the broker confirms the subscription; until then (or
            # if it refuses) the pullers keep long-polling.
            while not self._stop.is_set():
                try:
                    raw = socket.recv(timeout=1.0)
                except TimeoutError:
                    continue
                self._handle(raw, broker)

    def _handle(self, raw: str | bytes, broker: str) -> None:
        try:
            event: Any = json.loads(raw)
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        kind = event.get("type")
        if kind == "subscribed":
            self.connected = True
            logger.info("websocket subscribed on %s: push wake-ups on", broker)
            for flag in self._events.values():  # pull once now, then wait for pushes
                flag.set()
        elif kind == "wake":
            woken = self._events.get((str(event.get("topic")), str(event.get("group"))))
            if woken is not None:
                woken.set()
        elif kind == "error":
            logger.warning("websocket subscription refused: %s", event.get("message"))
        else:
            logger.debug("websocket event %s", event)

    def _disconnected(self) -> None:
        was = self.connected
        self.connected = False
        self._socket = None
        for flag in self._events.values():  # pullers waiting on a push go back to long-polls
            flag.set()
        if was:
            logger.warning("websocket disconnected: back to long-polling")
