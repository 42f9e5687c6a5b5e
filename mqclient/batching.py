"""Background batching for high-rate producers: many messages per call, every fate reported.

``submit`` puts a message in a bounded buffer and returns a ``Future`` at once; sender threads
drain the buffer in batches (up to ``max_batch`` messages, waiting at most ``linger`` seconds
for a batch to fill). Every future ends with the message's receipt or with an exception:

* a full buffer blocks ``submit`` (back-pressure) for up to ``block_timeout``, then raises
  :class:`~mqclient.errors.BufferFull` to the caller: the message was never accepted;
* a permanent error on one message (a batch is all-or-nothing on the broker) fails only that
  message's future; the rest of the batch is sent again;
* a broker outage longer than ``delivery_deadline`` fails the batch's futures with
  :class:`~mqclient.errors.BrokerUnavailable`.

Nothing is dropped silently, but the buffer lives in memory: a process crash loses what was
submitted and not yet sent. Callers that need "committed before I go on" wait on the future
(or use :meth:`Producer.produce`).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from mqclient.config import ClientConfig
from mqclient.errors import APIError, BufferFull, MQClientError, ProducerClosed
from mqclient.message import ProducedMessage
from mqclient.outgoing import MAX_BATCH, Delay, OutgoingMessage, build_message
from mqclient.receipts import receipts
from mqclient.transport import Transport

logger = logging.getLogger("mqclient.batching")

_ITEM_INDEX = re.compile(r"^messages\[(\d+)\]")

Callback = Callable[[ProducedMessage | None, BaseException | None], None]


@dataclass
class _Pending:
    out: OutgoingMessage
    future: Future[ProducedMessage]


class BatchingProducer:
    """Asynchronous, batched produce with futures, a bounded buffer and back-pressure.

    ``max_buffer`` bounds the messages held in memory (queued plus in flight). ``senders`` is
    the number of batches in flight at once.
    """

    def __init__(
        self,
        brokers: Iterable[str] | str | None = None,
        token: str | None = None,
        *,
        max_batch: int = 500,
        linger: float = 0.005,
        max_buffer: int = 10_000,
        block_timeout: float | None = 30.0,
        delivery_deadline: float = 120.0,
        senders: int = 2,
        auto_dedup: bool = True,
        transport: Transport | None = None,
        config: ClientConfig | None = None,
    ) -> None:
        if not 1 <= max_batch <= MAX_BATCH:
            raise ValueError(f"max_batch must be between 1 and {MAX_BATCH}")
        if max_buffer < max_batch:
            raise ValueError("max_buffer must be at least max_batch")
        self._owns_transport = transport is None
        if transport is None:
            transport = (config or ClientConfig.from_env(brokers=brokers, token=token)).new_transport()
        self.transport = transport
        self.max_batch = max_batch
        self.linger = linger
        self.max_buffer = max_buffer
        self.block_timeout = block_timeout
        self.delivery_deadline = delivery_deadline
        self.auto_dedup = auto_dedup
        self._queue: deque[_Pending] = deque()
        self._held = 0  # queued + in flight, what max_buffer bounds
        self._cond = threading.Condition()
        self._closed = False
        self._threads = [
            threading.Thread(target=self._run, name=f"mqclient-batch-{i}", daemon=True)
            for i in range(senders)
        ]
        for thread in self._threads:
            thread.start()

    # ------------------------------------------------------------------ public API

    def submit(
        self,
        topic: str,
        data: Any,
        *,
        group: str | None = None,
        key: str | None = None,
        delay: Delay | None = None,
        retry_count: int | None = None,
        timeout: int | None = None,
        dedup_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        broadcast: bool = False,
        priority: int | None = None,
        ttl: float | timedelta | None = None,
        expires_at: datetime | None = None,
        callback: Callback | None = None,
        tag: str | None = None,
    ) -> Future[ProducedMessage]:
        """Queue one message; the future resolves to its receipt once the broker committed.

        A publish (no ``group``) resolves to a receipt listing every copy (``copies``,
        ``ids``). ``callback(receipt, error)`` is called from a sender thread when the fate is
        known. Blocks while the buffer is full; raises :class:`BufferFull` after
        ``block_timeout`` seconds.
        """
        out = build_message(
            topic,
            data,
            group=group,
            key=key,
            delay=delay,
            retry_count=retry_count,
            timeout=timeout,
            dedup_key=dedup_key,
            headers=headers,
            priority=priority,
            ttl=ttl,
            expires_at=expires_at,
            tag=tag,
            broadcast=broadcast,
            auto_dedup=self.auto_dedup,
        )
        future: Future[ProducedMessage] = Future()
        if callback is not None:
            future.add_done_callback(_callback_adapter(callback))
        deadline = None if self.block_timeout is None else time.monotonic() + self.block_timeout
        with self._cond:
            while self._held >= self.max_buffer and not self._closed:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise BufferFull(
                        f"{self._held} messages buffered for {self.block_timeout}s; "
                        "the brokers are not keeping up"
                    )
                self._cond.wait(remaining)
            if self._closed:
                raise ProducerClosed("submit() after close()")
            self._queue.append(_Pending(out, future))
            self._held += 1
            self._cond.notify_all()
        return future

    @property
    def buffered(self) -> int:
        """Messages accepted and not yet resolved."""
        with self._cond:
            return self._held

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every message submitted so far has its fate; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._held:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def close(self, timeout: float | None = None) -> None:
        """Send what is buffered, then stop the sender threads. Later submits raise."""
        self.flush(timeout)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout)
        with self._cond:
            leftovers = list(self._queue)
            self._queue.clear()
        for pending in leftovers:  # only when flush timed out: say so, never drop silently
            _fail(pending, ProducerClosed("closed before the message could be sent"))
        if self._owns_transport:
            self.transport.close()

    def __enter__(self) -> BatchingProducer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ sender threads

    def _take_batch(self) -> list[_Pending] | None:
        """Wait for work, linger briefly for the batch to fill, and take it. ``None`` = stop."""
        with self._cond:
            while not self._queue:
                if self._closed:
                    return None
                self._cond.wait()
            linger_until = time.monotonic() + self.linger
            while len(self._queue) < self.max_batch and not self._closed:
                remaining = linger_until - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            batch: list[_Pending] = []
            while self._queue and len(batch) < self.max_batch:
                batch.append(self._queue.popleft())
            return batch

    def _run(self) -> None:
        while True:
            batch = self._take_batch()
            if batch is None:
                return
            if batch:
                self._send(batch)

    def _send(self, batch: list[_Pending]) -> None:
        """Send one batch; resolve every future, re-sending survivors of a partial rejection."""
        while batch:
            try:
                answer = self.transport.call(
                    "POST",
                    "/api/v1/messages",
                    json={"messages": [p.out.body for p in batch]},
                    deadline=self.delivery_deadline,
                )
            except APIError as exc:
                batch = self._split_rejected(batch, exc)
                continue
            except MQClientError as exc:
                for pending in batch:
                    self._resolve(pending, error=exc)
                return
            except Exception as exc:
                logger.exception("unexpected error while producing a batch")
                for pending in batch:
                    self._resolve(pending, error=exc)
                return
            try:
                stored = receipts(answer, [p.out for p in batch])
            except MQClientError as exc:
                for pending in batch:
                    self._resolve(pending, error=exc)
                return
            for pending, receipt in zip(batch, stored, strict=True):
                self._resolve(pending, result=receipt)
            return

    def _split_rejected(self, batch: list[_Pending], exc: APIError) -> list[_Pending]:
        """A batch is all-or-nothing: fail the message the error names and keep the others.

        Without an index to go by, a batch of many is split into singles so that only the
        messages that are really invalid fail; a single message simply fails.
        """
        if exc.status == 429 or exc.status >= 500:
            # The whole batch met it (a full backlog, a rate limit) after the transport's
            # retries: splitting would only wait the deadline again for every message.
            for pending in batch:
                self._resolve(pending, error=exc)
            return []
        match = _ITEM_INDEX.match(exc.field or "")
        if match and int(match.group(1)) < len(batch):
            index = int(match.group(1))
            self._resolve(batch[index], error=exc)
            return batch[:index] + batch[index + 1 :]
        if len(batch) == 1:
            self._resolve(batch[0], error=exc)
            return []
        for pending in batch:
            self._send([pending])
        return []

    def _resolve(
        self,
        pending: _Pending,
        *,
        result: ProducedMessage | None = None,
        error: BaseException | None = None,
    ) -> None:
        if error is not None:
            _fail(pending, error)
        elif result is not None:
            pending.future.set_result(result)
        with self._cond:
            self._held -= 1
            self._cond.notify_all()


def _fail(pending: _Pending, error: BaseException) -> None:
    logger.warning(
        "message to %s not stored: %s",
        pending.out.body.get("topic"),
        error,
        extra={"topic": pending.out.body.get("topic"), "dedup_key": pending.out.dedup_key},
    )
    pending.future.set_exception(error)


def _callback_adapter(callback: Callback) -> Callable[[Future[ProducedMessage]], None]:
    def on_done(future: Future[ProducedMessage]) -> None:
        error = future.exception()
        try:
            callback(None if error else future.result(), error)
        except Exception:  # a buggy callback must not kill the sender thread
            logger.exception("produce callback raised")

    return on_done
