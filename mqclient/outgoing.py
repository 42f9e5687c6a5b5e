"""A message on its way to the broker: building it from a producer's arguments, and reading
the broker's answer back into receipts. Shared by `Producer` and `BatchingProducer`."""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

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
        "priority",
        "ttl",
        "expires_at",
        "tag",
        "dedup_seconds",
        "dedup_conflict",
        "reply_to",
        "correlation_id",
    }
)


@dataclass(frozen=True)
class OutgoingMessage:
    """One message ready to send: its API body and the dedup key it carries."""

    body: dict[str, Any]
    dedup_key: str
    sdk_key: bool  # True when the SDK made the key up (see ProducedMessage.duplicate)

    @property
    def publish(self) -> bool:
        """Copied to every subscribed group: no ``group`` given (or ``broadcast``)."""
        return "group" not in self.body


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
    priority: int | None = None,
    ttl: float | timedelta | None = None,
    expires_at: datetime | None = None,
    tag: str | None = None,
    dedup_seconds: int | None = None,
    dedup_conflict: str | None = None,
    reply_to: str | None = None,
    correlation_id: str | None = None,
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
    if priority is not None:
        body["priority"] = int(priority)
    if tag is not None:
        body["tag"] = str(tag)
    if dedup_seconds is not None:
        body["dedup_seconds"] = int(dedup_seconds)
    if dedup_conflict is not None:
        body["dedup_conflict"] = dedup_conflict
    if reply_to is not None:
        body["reply_to"] = reply_to
    if correlation_id is not None:
        body["correlation_id"] = str(correlation_id)
    if ttl is not None:
        body["ttl_seconds"] = ttl.total_seconds() if isinstance(ttl, timedelta) else float(ttl)
    if expires_at is not None:
        body["expires_at"] = (expires_at if expires_at.tzinfo else expires_at.replace(tzinfo=UTC)).isoformat()
    sdk_key = dedup_key is None and auto_dedup
    final_key = new_dedup_key() if sdk_key else dedup_key
    if final_key is not None:
        body["dedup_key"] = final_key
    return OutgoingMessage(body=body, dedup_key=final_key or "", sdk_key=sdk_key)


def message_from_mapping(item: Mapping[str, Any], *, auto_dedup: bool = True) -> OutgoingMessage:
    """Build from a dict using ``produce``'s keyword names (``topic`` and ``data`` required)."""
    unknown = set(item) - MESSAGE_FIELDS
    if unknown:
        raise ValueError(f"unknown message field(s): {', '.join(sorted(unknown))}")
    if "topic" not in item or "data" not in item:
        raise ValueError("each message needs 'topic' and 'data'")
    fields = {name: value for name, value in item.items() if name not in {"topic", "data"}}
    return build_message(item["topic"], item["data"], auto_dedup=auto_dedup, **fields)
