"""The synchronous producer: one line to produce, durable before it returns.

``Producer.produce`` returns only after a broker answered 201, i.e. after the message was
committed. Transient failures are retried across brokers (see :mod:`mqclient.transport`);
because a retry after a lost answer would otherwise store the message twice, every message
gets a ``dedup_key`` before its first attempt when the caller did not give one.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

from mqclient.batching import BatchingProducer
from mqclient.config import ClientConfig
from mqclient.message import REPLY_GROUP_HEADER, Message, ProducedMessage
from mqclient.outgoing import (
    MAX_BATCH,
    Delay,
    OutgoingMessage,
    build_message,
    message_from_mapping,
)
from mqclient.receipts import receipts
from mqclient.replies import ReplyRouter
from mqclient.transactions import ProducerTransaction
from mqclient.transport import Transport


class Producer:
    """Send messages to the brokers; every call returns after the broker committed.

    >>> producer = Producer(brokers=["http://127.0.0.1:8000"], token="...")
    >>> producer.produce("orders", {"order": 42}, key="customer-7").id

    ``brokers`` and ``token`` default to ``MQ_BROKERS`` / ``MQ_TOKEN``. ``retry_deadline`` is how
    long one call keeps retrying transient failures before raising
    :class:`~mqclient.errors.BrokerUnavailable`.
    """

    def __init__(
        self,
        brokers: Iterable[str] | str | None = None,
        token: str | None = None,
        *,
        retry_deadline: float | None = None,
        request_timeout: float | None = None,
        auto_dedup: bool = True,
        config: ClientConfig | None = None,
        transport: Transport | None = None,
    ) -> None:
        self.config = config or ClientConfig.from_env(
            brokers=brokers,
            token=token,
            retry_deadline=retry_deadline,
            request_timeout=request_timeout,
        )
        self.auto_dedup = auto_dedup
        self._owns_transport = transport is None
        # Made here, not on first use: concurrent first requests must share one reply group.
        self._reply_group = f"reply-{uuid.uuid4().hex[:16]}"
        self._replies = ReplyRouter(self._pull_replies, self._ack_replies)
        self.transport = transport or self.config.new_transport()

    def produce(
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
        priority: int | None = None,
        ttl: float | timedelta | None = None,
        expires_at: datetime | None = None,
        tag: str | None = None,
        dedup_seconds: int | None = None,
        dedup_conflict: str | None = None,
        reply_to: str | None = None,
        correlation_id: str | None = None,
    ) -> ProducedMessage:
        """Store one message and return its receipt.

        With ``group``, the message goes to that group only: ``.id`` is the stored message.
        Without it, the message is a publish, stored once for every group subscribed to the
        topic (``default`` when there is none): ``.copies`` holds one receipt per copy and
        ``.ids`` / ``.groups`` list them; ``.id`` is the first copy's.

        ``delay`` is seconds, a ``timedelta`` or an absolute ``datetime``; ``timeout`` is the
        message's execution timeout in seconds (its lease derives from it). ``priority`` is 0-9
        (the broker's default 4): a queue group delivers higher priorities first. ``ttl``
        (seconds or a ``timedelta``) or ``expires_at`` (a ``datetime``): not delivered by
        then, the message becomes an ``EXPIRED`` dead letter.
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
            dedup_seconds=dedup_seconds,
            dedup_conflict=dedup_conflict,
            reply_to=reply_to,
            correlation_id=correlation_id,
            auto_dedup=self.auto_dedup,
        )
        return self._send([out])[0]

    def request(
        self,
        topic: str,
        data: Any,
        *,
        timeout: float = 30.0,
        reply_topic: str | None = None,
        group: str | None = None,
        headers: Mapping[str, str] | None = None,
        **fields: Any,
    ) -> Message:
        """Send a request and wait for its reply: produce ``data`` to ``topic`` (to ``group``,
        or as a publish) naming ``reply_to`` = ``reply_topic`` (default ``<topic>.reply``)
        and a fresh ``correlation_id``, then wait for the reply with that correlation id on
        this producer's own reply group of ``reply_topic``. The handler answers with
        ``message.reply(data)``. Returns the reply (acknowledged); raises ``TimeoutError`` when
        none came within ``timeout`` seconds. Safe to call from several threads at once: one
        call at a time long-polls the reply group and hands every reply to the call waiting
        for it (see :mod:`mqclient.replies`). A reply to a request that already timed out is
        acknowledged and dropped."""
        reply_topic = reply_topic or f"{topic}.reply"
        correlation = uuid.uuid4().hex
        deadline = time.monotonic() + timeout
        self._replies.expect(correlation)
        try:
            self.produce(topic, data, group=group, reply_to=reply_topic, correlation_id=correlation,
                         headers={**(headers or {}), REPLY_GROUP_HEADER: self.reply_group}, **fields)
        except BaseException:
            self._replies.forget(correlation)
            raise
        reply = self._replies.wait(correlation, reply_topic, deadline)
        if reply is None:
            raise TimeoutError(f"no reply to {correlation} on {reply_topic} within {timeout} s")
        return reply

    def _pull_replies(self, reply_topic: str, wait: int) -> list[Message]:
        answer = self.transport.call(
            "POST", "/api/v1/pull",
            json={"topic": reply_topic, "group": self.reply_group, "consumer": self.reply_group,
                  "max_messages": 10, "wait_seconds": wait},
            timeout=wait + self.config.request_timeout,
        )
        return [Message.from_api(item) for item in (answer or {}).get("messages") or []]

    def _ack_replies(self, replies: list[Message]) -> None:
        self.transport.call("POST", "/api/v1/ack", json={
            "consumer": self.reply_group, "results": [{"id": m.id, "status": "SUCCESS"} for m in replies]})

    @property
    def reply_group(self) -> str:
        """This producer's own group on reply topics (``Producer.request``)."""
        return self._reply_group

    def produce_many(self, messages: Iterable[Mapping[str, Any]]) -> list[ProducedMessage]:
        """Store many messages (dicts with ``produce``'s keyword names) in as few calls as the
        broker's per-call limit allows; returns one receipt per message, in order (a publish's
        receipt lists its copies, as ``produce``'s does).

        Each call is all-or-nothing; past 1,000 messages the list is sent in chunks, and a
        failing chunk raises after the earlier chunks were stored (their dedup keys make
        re-sending the whole list safe).
        """
        outs = [message_from_mapping(item, auto_dedup=self.auto_dedup) for item in messages]
        stored: list[ProducedMessage] = []
        for start in range(0, len(outs), MAX_BATCH):
            stored.extend(self._send(outs[start : start + MAX_BATCH]))
        return stored

    def broadcast(
        self,
        topic: str,
        data: Any,
        *,
        key: str | None = None,
        delay: Delay | None = None,
        retry_count: int | None = None,
        timeout: int | None = None,
        dedup_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        priority: int | None = None,
        ttl: float | timedelta | None = None,
        expires_at: datetime | None = None,
        tag: str | None = None,
    ) -> list[ProducedMessage]:
        """Store one copy for every group subscribed to the topic (what ``produce`` without
        ``group`` does); returns one receipt per copy."""
        out = build_message(
            topic,
            data,
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
            broadcast=True,
            auto_dedup=self.auto_dedup,
        )
        return list(self._send([out])[0].copies)

    def transaction(self, *, check_url: str, check_after_seconds: int = 30) -> ProducerTransaction:
        """A transactional produce: messages stored PREPARED, committed when the ``with``
        block ends normally, rolled back when it raises. ``check_url`` is where the broker
        asks about a transaction left open (see :func:`mqclient.transaction_check_app`)."""
        return ProducerTransaction(
            self.transport,
            auto_dedup=self.auto_dedup,
            check_url=check_url,
            check_after_seconds=check_after_seconds,
        )

    def cancel(self, message_id: int) -> dict[str, Any]:
        """Withdraw a message not yet delivered (NEW, delayed or PREPARED): it becomes
        CANCELLED. Needs an admin token; a running or finished message raises
        :class:`~mqclient.errors.Conflict`. Returns the message as the broker now has it."""
        return self.transport.call("POST", f"/api/v1/messages/{int(message_id)}/cancel")

    def batch(
        self, messages: Iterable[Mapping[str, Any]], *, callback_topic: str, batch_id: str | None = None
    ) -> tuple[str, list[ProducedMessage]]:
        """Store ``messages`` (dicts with ``produce``'s keyword names, at most one call's worth)
        as one batch, all or nothing. When every stored copy has finished (succeeded, dead,
        expired or cancelled), the broker produces one message to ``callback_topic`` with tag
        ``batch.completed`` and data ``{"batch_id", "total", "success", "dead", "expired",
        "cancelled"}``. Returns the batch id (``batch_id``, or one the broker made up) and one
        receipt per message. A taken ``batch_id`` raises :class:`~mqclient.errors.Conflict`."""
        outs = [message_from_mapping(m, auto_dedup=self.auto_dedup) for m in messages]
        body: dict[str, Any] = {"callback_topic": callback_topic, "messages": [o.body for o in outs]}
        if batch_id is not None:
            body["batch_id"] = batch_id
        answer = self.transport.call("POST", "/api/v1/batches", json=body)
        return str(answer["batch_id"]), receipts(answer, outs)

    def batch_status(self, batch_id: str) -> dict[str, Any]:
        """A batch's counts so far (``total``, ``pending``, ``success``, ``dead``, ``expired``,
        ``cancelled``) and ``completed_at`` (None while members are unfinished)."""
        return dict(self.transport.call("GET", f"/api/v1/batches/{quote(batch_id, safe='')}"))

    def batching(self, **options: Any) -> BatchingProducer:
        """A background batching producer sharing this producer's connections.

        See :class:`mqclient.batching.BatchingProducer` for ``max_batch``, ``linger``,
        ``max_buffer``, ``block_timeout`` and ``delivery_deadline``.
        """
        return BatchingProducer(transport=self.transport, auto_dedup=self.auto_dedup, **options)

    def _send(self, outs: list[OutgoingMessage]) -> list[ProducedMessage]:
        if not outs:
            return []
        answer = self.transport.call(
            "POST", "/api/v1/messages", json={"messages": [out.body for out in outs]}
        )
        return receipts(answer, outs)

    def close(self) -> None:
        """Release pooled connections."""
        if self._owns_transport:
            self.transport.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
