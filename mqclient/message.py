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

    @classmethod
    def from_api(cls, item: dict[str, Any]) -> Message:
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
        return [copy.id for copy in self.copies] if self.copies else [self.id]

    @property
    def groups(self) -> list[str]:
        """The group of every stored copy, in the order of ``ids``."""
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
        cls, entries: list[dict[str, Any]], *, dedup_key: str | None, sdk_key: bool
    ) -> ProducedMessage:
        """The receipt of one produce item from its answer entries (one per stored copy)."""
        copies = tuple(cls.from_api(e, dedup_key=dedup_key, sdk_key=sdk_key) for e in entries)
        first = copies[0]
        return replace(first, duplicate=all(c.duplicate for c in copies), copies=copies)


@dataclass(frozen=True)
class AckOutcome:
    """The broker's answer to one acked result: ``success``, ``retry_scheduled``, ``failed``
    (dead letter) or ``stale`` (the lease had passed to someone else)."""

    id: int
    outcome: str
    effect_time: datetime | None = None
