"""The synchronous producer: one line to produce, durable before it returns.

``Producer.produce`` returns only after a broker answered 201, i.e. after the message was
committed. Transient failures are retried across brokers (see :mod:`mqclient.transport`);
because a retry after a lost answer would otherwise store the message twice, every message
gets a ``dedup_key`` before its first attempt when the caller did not give one.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from mqclient.config import ClientConfig
from mqclient.message import ProducedMessage
from mqclient.transport import Transport

if TYPE_CHECKING:
    from mqclient.batching import BatchingProducer
    from mqclient.transactions import ProducerTransaction

#: API.md's default limit of messages per produce call.
MAX_BATCH = 1000

Delay = float | int | timedelta | datetime

#: Keyword names accepted for one message, by ``produce`` and as dict keys by ``produce_many``.
MESSAGE_FIELDS = frozenset(
    {
        "topic",
        "data",
        "group",
        "key",
        "delay",
        "retry_count",
        "timeout",
        "dedup_key",
        "headers",
        "broadcast",
    }
)


@dataclass(frozen=True)
class OutgoingMessage:
    """One message ready to send: its API body and the dedup key it carries."""

    body: dict[str, Any]
    dedup_key: str
    sdk_key: bool  # True when the SDK made the key up (see ProducedMessage.duplicate)
    broadcast: bool = False


def new_dedup_key() -> str:
    """A key no caller will ever choose: ``sdk-`` and a random uuid4."""
    return f"sdk-{uuid.uuid4().hex}"


def _delay_fields(delay: Delay | None) -> dict[str, Any]:
    """``delay_seconds`` for a relative delay, ``effect_time`` for an absolute datetime.

    A relative delay is sent as seconds rather than turned into a time here, so the broker's
    clock, not ours, decides when it comes due.
    """
    if delay is None:
        return {}
    if isinstance(delay, datetime):
        when = delay if delay.tzinfo else delay.replace(tzinfo=UTC)
        return {"effect_time": when.isoformat()}
    seconds = delay.total_seconds() if isinstance(delay, timedelta) else float(delay)
    if seconds < 0:
        raise ValueError("delay must not be negative")
    return {"delay_seconds": math.ceil(seconds)}


def build_message(
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
    auto_dedup: bool = True,
) -> OutgoingMessage:
    """Build the API body of one message; only set fields are sent so topic defaults apply."""
    if broadcast and group is not None:
        raise ValueError("a broadcast goes to every group: do not pass group")
    body: dict[str, Any] = {"topic": topic, "data": data}
    if group is not None:
        body["group"] = group
    if key is not None:
        body["key"] = key
    body.update(_delay_fields(delay))
    if retry_count is not None:
        body["retry_count"] = int(retry_count)
    if timeout is not None:
        body["timeout_seconds"] = int(timeout)
    if headers:
        body["headers"] = {str(name): str(value) for name, value in headers.items()}
    if broadcast:
        body["broadcast"] = True
    sdk_key = dedup_key is None and auto_dedup
    final_key = new_dedup_key() if sdk_key else dedup_key
    if final_key is not None:
        body["dedup_key"] = final_key
    return OutgoingMessage(
        body=body, dedup_key=final_key or "", sdk_key=sdk_key, broadcast=broadcast
    )


def message_from_mapping(item: Mapping[str, Any], *, auto_dedup: bool = True) -> OutgoingMessage:
    """Build from a dict using ``produce``'s keyword names (``topic`` and ``data`` required)."""
    unknown = set(item) - MESSAGE_FIELDS
    if unknown:
        raise ValueError(f"unknown message field(s): {', '.join(sorted(unknown))}")
    if "topic" not in item or "data" not in item:
        raise ValueError("each message needs 'topic' and 'data'")
    fields = {name: value for name, value in item.items() if name not in {"topic", "data"}}
    return build_message(item["topic"], item["data"], auto_dedup=auto_dedup, **fields)


def receipts(answer: Any, sent: list[OutgoingMessage]) -> list[ProducedMessage]:
    """Turn a ``201`` answer into receipts; items map back by position, a broadcast item's
    copies all carry its dedup key (a request holding a broadcast is flattened in order)."""
    entries = list((answer or {}).get("messages") or [])
    if all(not out.broadcast for out in sent) and len(entries) == len(sent):
        return [
            ProducedMessage.from_api(entry, dedup_key=out.dedup_key or None, sdk_key=out.sdk_key)
            for entry, out in zip(entries, sent, strict=True)
        ]
    sdk_key = all(out.sdk_key for out in sent)
    key = sent[0].dedup_key if len(sent) == 1 else None
    return [ProducedMessage.from_api(entry, dedup_key=key, sdk_key=sdk_key) for entry in entries]


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
        self.transport = transport or Transport(
            self.config.require_brokers(),
            self.config.token,
            request_timeout=self.config.request_timeout,
            retry_deadline=self.config.retry_deadline,
        )

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
    ) -> ProducedMessage:
        """Store one message and return its receipt (``.id``).

        ``delay`` is seconds, a ``timedelta`` or an absolute ``datetime``; ``timeout`` is the
        message's execution timeout in seconds (its lease derives from it).
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
            auto_dedup=self.auto_dedup,
        )
        return self._send([out])[0]

    def produce_many(self, messages: Iterable[Mapping[str, Any]]) -> list[ProducedMessage]:
        """Store many messages (dicts with ``produce``'s keyword names) in as few calls as the
        broker's per-call limit allows.

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
    ) -> list[ProducedMessage]:
        """Store one copy for every group of the topic; returns one receipt per copy."""
        out = build_message(
            topic,
            data,
            key=key,
            delay=delay,
            retry_count=retry_count,
            timeout=timeout,
            dedup_key=dedup_key,
            headers=headers,
            broadcast=True,
            auto_dedup=self.auto_dedup,
        )
        return self._send([out])

    def transaction(self, *, check_url: str, check_after_seconds: int = 30) -> ProducerTransaction:
        """A transactional produce: messages stored PREPARED, committed when the ``with``
        block ends normally, rolled back when it raises. ``check_url`` is where the broker
        asks about a transaction left open (see :func:`mqclient.transaction_check_app`)."""
        from mqclient.transactions import ProducerTransaction

        return ProducerTransaction(self, check_url=check_url, check_after_seconds=check_after_seconds)

    def cancel(self, message_id: int) -> dict[str, Any]:
        """Withdraw a message not yet delivered (NEW, delayed or PREPARED): it becomes
        CANCELLED. Needs an admin token; a running or finished message raises
        :class:`~mqclient.errors.Conflict`. Returns the message as the broker now has it."""
        return self.transport.call("POST", f"/api/v1/messages/{int(message_id)}/cancel")

    def batching(self, **options: Any) -> BatchingProducer:
        """A background batching producer sharing this producer's connections.

        See :class:`mqclient.batching.BatchingProducer` for ``max_batch``, ``linger``,
        ``max_buffer``, ``block_timeout`` and ``delivery_deadline``.
        """
        from mqclient.batching import BatchingProducer

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
