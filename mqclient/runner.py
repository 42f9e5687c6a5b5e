"""The consumer runner: registry, pulls, handlers, acks, leases, and a graceful stop.

``Runner(specs).run()`` blocks until SIGTERM/SIGINT (or :meth:`Runner.stop`), then:

1. stops pulling and hands back, at once, every pulled message no handler started
   (``POST /api/v1/release``: no retry is spent on them);
2. waits for the outstanding long-polls to return (what they bring is released too);
3. lets running handlers finish within ``grace_seconds``, still extending their leases and
   acking their results; handlers still running after that are failed (retried elsewhere);
4. flushes the acks and leaves the registry.

A second signal exits at once (the broker recovers the leases when they expire).
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import socket
import threading
import time
from collections.abc import Iterable
from types import FrameType
from typing import Any

from mqclient.acker import Acker
from mqclient.admin import Groups, create_groups
from mqclient.config import ClientConfig
from mqclient.consumer import ConsumerSpec
from mqclient.delivery import Delivery, Result, State
from mqclient.errors import APIError, ConfigurationError, InvalidRequest, MQClientError
from mqclient.heartbeat import Heartbeat
from mqclient.leases import LeaseKeeper
from mqclient.message import AckOutcome, Message
from mqclient.subscription import Subscription
from mqclient.transport import Transport

logger = logging.getLogger("mqclient.runner")
delivery_logger = logging.getLogger("mqclient.delivery")


def new_consumer_id() -> str:
    """``<hostname>:<pid>:<random hex>``: unique per process start, readable in the console."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class Runner:
    """Runs every subscription of ``specs`` in this process under one consumer id."""

    def __init__(
        self,
        specs: Iterable[ConsumerSpec],
        *,
        config: ClientConfig | None = None,
        transport: Transport | None = None,
        consumer_id: str | None = None,
    ) -> None:
        self.config = config or ClientConfig.from_env()
        self.consumer_id = consumer_id or new_consumer_id()
        self._owns_transport = transport is None
        self.transport = transport or self.config.new_transport()
        self._stop = threading.Event()
        self._signals = 0
        self._lock = threading.Lock()
        self._inflight: dict[int, Delivery] = {}
        self.subscriptions = self._subscriptions(list(specs))
        self.acker = Acker(
            self.transport,
            self.consumer_id,
            self._on_outcome,
            deadline=self.config.retry_deadline,
        )
        self.leases = LeaseKeeper(
            self.transport,
            self.consumer_id,
            self.deliveries,
            lambda delivery: delivery.subscription.time_out(delivery),
        )
        self.heartbeat = Heartbeat(
            self.transport,
            self.consumer_id,
            [sub.subscription_body() for sub in self.subscriptions],
        )
        self.wakeups: Any = None  # the optional WebSocket listener (mqclient.websocket)

    def _subscriptions(self, specs: list[ConsumerSpec]) -> list[Subscription]:
        if not specs:
            raise ConfigurationError("no @consumer handler found in the loaded modules")
        subscriptions: list[Subscription] = []
        seen: set[tuple[str, str]] = set()
        for spec in specs:
            group = spec.group or self.config.group
            if (spec.topic, group) in seen:
                raise ConfigurationError(
                    f"two handlers for topic {spec.topic!r}, group {group!r} in one process"
                )
            seen.add((spec.topic, group))
            concurrency = spec.concurrency or self.config.concurrency
            subscriptions.append(Subscription(spec, self, group=group, concurrency=concurrency))
        return subscriptions

    # ------------------------------------------------------------------ lifecycle

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def stop(self) -> None:
        """Ask the runner to stop gracefully (thread- and signal-safe)."""
        self._stop.set()
        for sub in self.subscriptions:
            sub.wake()

    def sleep(self, seconds: float) -> None:
        """Sleep, but wake up at once when the runner stops."""
        self._stop.wait(seconds)

    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT stop gracefully; a second one exits at once."""

        def handle(signum: int, frame: FrameType | None) -> None:
            self._signals += 1
            if self._signals > 1:
                logger.warning("second signal: exiting now without waiting for handlers")
                os._exit(128 + signum)
            logger.info("signal %s: stopping", signal.Signals(signum).name)
            self.stop()

        signal.signal(signal.SIGTERM, handle)
        signal.signal(signal.SIGINT, handle)

    def run(self, *, install_signals: bool = True) -> int:
        """Register, consume until stopped, shut down gracefully. Returns an exit code."""
        if install_signals and threading.current_thread() is threading.main_thread():
            self.install_signal_handlers()
        # Before registering, which would create these groups from "latest".
        starts = [(s.topic, s.group, s.spec.start) for s in self.subscriptions if s.spec.start]
        if not create_groups(Groups(self.transport), starts):
            self.transport.close()
            return 2
        try:
            self.heartbeat.beat(
                deadline=min(10.0, self.config.retry_deadline), should_stop=lambda: self.stopping
            )
        except APIError as exc:
            if exc.status < 500:  # a bad token or scope: running on would only fail every pull
                logger.error("could not register consumer %s: %s", self.consumer_id, exc)
                self.transport.close()
                return 2
            logger.warning("registering failed, consuming anyway and retrying: %s", exc)
        except MQClientError as exc:
            # No broker reachable right now: the pullers and the heartbeat keep trying.
            logger.warning("registering failed, consuming anyway and retrying: %s", exc)
        if self.stopping:
            self.heartbeat.leave()
            return 0
        logger.info(
            "consumer %s started: %s",
            self.consumer_id,
            ", ".join(f"{s.topic}/{s.group}x{s.concurrency}" for s in self.subscriptions),
            extra={"consumer": self.consumer_id, "brokers": self.transport.brokers},
        )
        self.acker.start()
        self.leases.start()
        self.heartbeat.start()
        if self.config.websocket:
            self._start_websocket()
        for sub in self.subscriptions:
            sub.start()
        while not self._stop.wait(0.5):
            pass
        self._shutdown()
        return 0

    def _start_websocket(self) -> None:
        from mqclient.websocket import WakeupListener

        try:
            self.wakeups = WakeupListener(self)
            self.wakeups.start()
        except ImportError:
            logger.warning("MQ_WEBSOCKET is set but 'websockets' is not installed; long-poll only")
            self.wakeups = None

    def _shutdown(self) -> None:
        grace_deadline = time.monotonic() + self.config.grace_seconds
        if self.wakeups is not None:
            self.wakeups.stop()
        unstarted = [d for sub in self.subscriptions for d in sub.take_unstarted()]
        self.release(unstarted)
        logger.info(
            "stopping: released %d unstarted message(s), waiting for %d running handler(s)",
            len(unstarted),
            sum(sub.running for sub in self.subscriptions),
        )
        # An outstanding long-poll may still claim messages for us: wait for it to come back
        # (its catch is released) rather than leave leases to expire and spend retries.
        poll_bound = self.config.wait_seconds + self.config.request_timeout + 1
        for sub in self.subscriptions:
            sub.join(poll_bound)
        for sub in self.subscriptions:
            sub.wait_idle(grace_deadline)
        for sub in self.subscriptions:
            for delivery in sub.abandon_running():
                self.submit_result(
                    Result(
                        delivery,
                        "FAIL",
                        f"abandoned: consumer shut down and the handler did not finish within "
                        f"the {self.config.grace_seconds:g}s grace period",
                        duration=delivery.duration,
                    )
                )
        self.acker.stop(timeout=10.0)
        self.leases.stop()
        self.heartbeat.leave()
        for sub in self.subscriptions:
            sub.pool.shutdown()
        logger.info("consumer %s stopped", self.consumer_id, extra={"consumer": self.consumer_id})
        if self._owns_transport:
            self.transport.close()

    # ------------------------------------------------------------------ broker calls

    def pull(self, sub: Subscription, max_messages: int, *, carry: bool = True) -> list[Message]:
        """Long-poll for up to ``max_messages``; the HTTP timeout outlasts the poll.

        The pull carries the results waiting in the acker (an extension of API.md: the
        broker acks them, then claims). Such a pull does not wait: their outcomes come back
        at once, and an empty answer is followed by a long-poll as usual."""
        carried = self.acker.take_for_pull() if carry else []
        wait = 0 if carried else self.poll_wait(sub)
        body: dict[str, Any] = {
            "topic": sub.topic,
            "group": sub.group,
            "consumer": self.consumer_id,
            "max_messages": max_messages,
            "wait_seconds": wait,
        }
        if carried:
            body["results"] = self.acker.wire_results(carried)
        try:
            answer = self.transport.call(
                "POST",
                "/api/v1/pull",
                json=body,
                timeout=wait + self.config.request_timeout,
                should_stop=lambda: self.stopping,
            )
        except InvalidRequest:
            if not carried:
                raise
            # The results made the pull invalid: they go on their own (and fail there, with a
            # log line each), and the pull goes without them.
            self.acker.pulled(carried, None)
            return self.pull(sub, max_messages, carry=False)
        except BaseException:
            self.acker.pulled(carried, None)
            raise
        self.acker.pulled(carried, answer if isinstance(answer, dict) else {})
        return [Message.from_api(item, transport=self.transport) for item in (answer or {}).get("messages") or []]

    def poll_wait(self, sub: Subscription) -> int:
        """Long-poll length; the WebSocket listener may shorten it while it is connected."""
        if self.wakeups is not None:
            return int(self.wakeups.poll_wait(sub, self.config.wait_seconds))
        return self.config.wait_seconds

    def idle_pull(self, sub: Subscription) -> None:
        """Called after an empty pull; with push wake-ups, wait for one before polling again."""
        if self.wakeups is not None:
            self.wakeups.wait(sub)

    def release(self, deliveries: list[Delivery]) -> None:
        """Hand unstarted messages back: they return to NEW at once, no retry spent."""
        if not deliveries:
            return
        for delivery in deliveries:
            delivery.state = State.RELEASED
        ids = [d.message.id for d in deliveries]
        try:
            self.transport.call(
                "POST",
                "/api/v1/release",
                json={"consumer": self.consumer_id, "ids": ids},
                deadline=min(10.0, self.config.retry_deadline),
            )
            outcome = "released"
        except MQClientError as exc:
            logger.error(
                "release of %d message(s) failed (their leases will expire): %s", len(ids), exc
            )
            outcome = "release_failed"
        for delivery in deliveries:
            self._untrack(delivery)
            self._log_delivery(delivery, status="RELEASED", outcome=outcome, duration=0.0)

    # ------------------------------------------------------------------ bookkeeping

    def track(self, deliveries: list[Delivery]) -> None:
        with self._lock:
            for delivery in deliveries:
                self._inflight[delivery.message.id] = delivery

    def _untrack(self, delivery: Delivery) -> None:
        with self._lock:
            if self._inflight.get(delivery.message.id) is delivery:
                del self._inflight[delivery.message.id]

    def deliveries(self) -> list[Delivery]:
        """Snapshot of the messages this process holds a lease on."""
        with self._lock:
            return list(self._inflight.values())

    def submit_result(self, result: Result) -> None:
        self.acker.submit(result)

    def _on_outcome(
        self, result: Result, outcome: AckOutcome | None, error: BaseException | None
    ) -> None:
        delivery = result.delivery
        # A timed-out delivery stays tracked only until its FAIL is acked; its thread may run on.
        self._untrack(delivery)
        self._log_delivery(
            delivery,
            status=result.status,
            outcome=outcome.outcome if outcome else "ack_failed",
            duration=result.duration,
            log=result.log,
            retry=result.retry,
            error=str(error) if error else None,
        )

    def _log_delivery(
        self, delivery: Delivery, *, status: str, outcome: str, duration: float, **more: Any
    ) -> None:
        """One structured line per delivery: what ops greps for when a message goes missing."""
        level = logging.INFO if status in {"SUCCESS", "RELEASED"} else logging.WARNING
        if not delivery_logger.isEnabledFor(level):
            return  # the fields below cost more than the handler of a small message
        message = delivery.message
        fields: dict[str, Any] = {
            "event": "delivery",
            "id": message.id,
            "topic": message.topic,
            "group": message.group,
            "attempt": message.attempt,
            "status": status,
            "outcome": outcome,
            "duration_ms": round(duration * 1000, 1),
            "consumer": self.consumer_id,
            "handler": delivery.subscription.spec.name,
        }
        if status == "FAIL":
            fields["log"] = str(more.get("log", ""))[:500]
            if more.get("retry") is False:
                fields["retry"] = False
        if more.get("error"):
            fields["error"] = more["error"]
        delivery_logger.log(
            level,
            "message %s %s/%s attempt %s: %s -> %s in %.0f ms",
            message.id,
            message.topic,
            message.group,
            message.attempt,
            status,
            outcome,
            duration * 1000,
            extra=fields,
        )
