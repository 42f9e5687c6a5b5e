"""Value objects the SDK hands to applications: what a handler receives, what produce returns."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any


def parse_time(value: Any) -> datetime | None:
    """Parse an API.md ISO 8601 time (``Z`` or an offset); ``None`` for anything else."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


# The header naming the requester's own reply group (Producer.request); `reply` sends there.
REPLY_GROUP_HEADER = "mq-reply-group"
FILTERED = "FILTERED"  # the status of a publish's receipt when no group's filter wanted it


@dataclass(frozen=True)
class Message:
    """One delivered message, as a consumer handler receives it.

    ``attempt`` counts deliveries so far (1 on the first), so a handler can behave differently
    on a redelivery; ``data`` is exactly the JSON value that was produced.
    """

    id: int
    topic: str
    group: str
    data: Any
    key: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    attempt: int = 1
    retry_remaining: int = 0
    timeout_seconds: int = 60
    effect_time: datetime | None = None
    add_time: datetime | None = None
    lease_expires_at: datetime | None = None
    tag: str | None = None
    reply_to: str | None = None
    correlation_id: str | None = None
    # How `reply` reaches the brokers: the transport of the runner that pulled it.
    transport: Any = field(default=None, repr=False, compare=False)

    def reply(self, data: Any, **fields: Any) -> dict[str, Any]:
        """Answer a request: produce ``data`` to this message's ``reply_to`` topic with its
        ``correlation_id`` (to the requester's own reply group when it named one; other
        ``fields`` as ``produce`` takes them, e.g. ``headers``). Returns the broker's entry
        for the reply. ValueError when the message asked for no reply."""
        from mqclient.outgoing import build_message

        if self.reply_to is None or self.transport is None:
            raise ValueError(f"message {self.id} names no reply_to (or was not pulled by a runner)")
        group = self.headers.get(REPLY_GROUP_HEADER)
        out = build_message(self.reply_to, data, group=group, correlation_id=self.correlation_id, **fields)
        answer = self.transport.call("POST", "/api/v1/messages", json={"messages": [out.body]})
        return dict((answer or {}).get("messages", [{}])[0])

    @classmethod
    def from_api(cls, item: dict[str, Any], *, transport: Any = None) -> Message:
        """Build from one item of a ``POST /api/v1/pull`` answer."""
        return cls(
            id=int(item["id"]),
            topic=str(item.get("topic", "")),
            group=str(item.get("group", "")),
            data=item.get("data"),
            key=item.get("key"),
            headers=dict(item.get("headers") or {}),
            attempt=int(item.get("attempt") or 1),
            retry_remaining=int(item.get("retry_remaining") or 0),
            timeout_seconds=int(item.get("timeout_seconds") or 60),
            effect_time=parse_time(item.get("effect_time")),
            add_time=parse_time(item.get("add_time")),
            lease_expires_at=parse_time(item.get("lease_expires_at")),
            tag=item.get("tag"),
            reply_to=item.get("reply_to"),
            correlation_id=item.get("correlation_id"),
            transport=transport,
        )


@dataclass(frozen=True)
class ProducedMessage:
    """The broker's receipt for one produced message.

    A message produced with a ``group`` is stored once: ``copies`` holds just that message.
    A publish (no ``group``) is stored once per group subscribed to the topic: ``copies`` holds
    every copy, and ``id``, ``group`` and ``status`` are those of the first. ``ids`` and
    ``groups`` list them all either way.

    ``duplicate`` is true when a ``dedup_key`` *you* chose matched a message already stored
    (for a publish: every copy did). When the SDK generated the key itself, a duplicate can
    only be its own earlier attempt whose answer was lost, so it is reported as not a
    duplicate: the message was stored once.

    A publish that every subscribed group's filter declined is stored nowhere: its receipt
    has ``status`` ``FILTERED``, ``id`` 0 and no copies.
    """

    id: int
    topic: str
    group: str
    status: str = "NEW"
    duplicate: bool = False
    dedup_key: str | None = None
    copies: tuple[ProducedMessage, ...] = field(default=(), repr=False)

    @property
    def ids(self) -> list[int]:
        """The id of every stored copy (one for a point-to-point message)."""
        if self.status == FILTERED:
            return []
        return [copy.id for copy in self.copies] if self.copies else [self.id]

    @property
    def groups(self) -> list[str]:
        """The group of every stored copy, in the order of ``ids``."""
        if self.status == FILTERED:
            return []
        return [copy.group for copy in self.copies] if self.copies else [self.group]

    @classmethod
    def from_api(
        cls, item: dict[str, Any], *, dedup_key: str | None, sdk_key: bool
    ) -> ProducedMessage:
        """Build the receipt of one answer entry (one stored message)."""
        return cls(
            id=int(item["id"]),
            topic=str(item.get("topic", "")),
            group=str(item.get("group", "")),
            status=str(item.get("status", "NEW")),
            duplicate=bool(item.get("duplicate")) and not sdk_key,
            dedup_key=dedup_key,
        )

    @classmethod
    def from_copies(
        cls, entries: list[dict[str, Any]], *, dedup_key: str | None, sdk_key: bool, topic: str = ""
    ) -> ProducedMessage:
        """The receipt of one produce item from its answer entries (one per stored copy)."""
        copies = tuple(cls.from_api(e, dedup_key=dedup_key, sdk_key=sdk_key) for e in entries)
        if not copies:  # a publish no group's filter wanted
            return cls(id=0, topic=topic, group="", status=FILTERED, dedup_key=dedup_key)
        first = copies[0]
        return replace(first, duplicate=all(c.duplicate for c in copies), copies=copies)


@dataclass(frozen=True)
class AckOutcome:
    """The broker's answer to one acked result: ``success``, ``retry_scheduled``, ``failed``
    (dead letter) or ``stale`` (the lease had passed to someone else)."""

    id: int
    outcome: str
    effect_time: datetime | None = None
