"""The answers of the hot path: a pulled message as a consumer receives it, and a whole pull
answer rendered straight to bytes (the stored data text goes in unparsed)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from rest_framework.renderers import JSONRenderer

from messages.models import Message


def message_delivery(message: Message) -> dict[str, Any]:
    """A pulled message as a consumer receives it."""
    return _delivery(message, json.loads(message.data), _as_is)


def _delivery(message: Message, data: Any, time: Callable[[datetime | None], Any]) -> dict[str, Any]:
    """The delivery fields, with `data` given and each time passed through `time`."""
    headers = message.headers or {}
    return {
        "id": message.id,
        "topic": message.topic,
        "group": message.group_name,
        "data": data,
        "key": message.key,
        "tag": message.tag,
        "headers": headers,
        "reply_to": headers.get("mq-reply-to"),
        "correlation_id": headers.get("mq-correlation-id"),
        "attempt": message.attempt,
        "retry_remaining": message.retry_remaining,
        "timeout_seconds": message.timeout_seconds,
        "effect_time": time(message.effect_time),
        "add_time": time(message.add_time),
        "lease_expires_at": time(message.lease_expires_at),
    }


def _as_is(value: datetime | None) -> datetime | None:
    return value


# A pull answer is encoded with a stand-in for each message's data, which the stored text then
# replaces unparsed: it is valid JSON already, written by `validation.data_text`.
_DATA_STANDIN = "\x00mq-data\x00"
_DATA_STANDIN_ENCODED = json.dumps(_DATA_STANDIN)
# DRF's JSONRenderer with the project's settings (UNICODE_JSON, COMPACT_JSON, STRICT_JSON),
# minus its Python-level `default()` hook: `pull_answer` formats the times itself.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_RENDERER = JSONRenderer()


def pull_answer(messages: Sequence[Message], outcomes: list[dict[str, Any]] | None = None) -> bytes:
    """`{"messages": [message_delivery(m), ...]}` rendered byte for byte as DRF renders it,
    at a fraction of the cost; with `outcomes` (the acks the pull carried), also
    `"results": [...]` as `POST /api/v1/ack` answers them. The messages may also be rows
    with a Message's attributes (a produce's hand-off renders its `HandedMessage` tuples).
    """
    answer = _messages_answer(messages)
    if outcomes is None:
        return answer
    return answer[:-1] + b',"results":' + _RENDERER.render(outcomes) + b"}"


def _messages_answer(messages: Sequence[Message]) -> bytes:
    """The messages of `pull_answer`.

    Each message's stored data text goes into the answer unparsed, and each distinct time is
    formatted once: parsing the data only to encode it again, and formatting every time
    through the encoder's Python hook, would make rendering the most expensive part of a
    pull (1.2 ms for 100 messages of ~200 bytes against 0.27 ms this way). A claimed
    batch shares its lease expiry, and a produced batch its add and effect times, so each
    distinct time is formatted once.
    """
    times: dict[datetime, str] = {}

    def time_text(value: datetime | None) -> str | None:
        if value is None:
            return None
        text = times.get(value)
        if text is None:
            text = value.isoformat()
            text = times[value] = text[:-6] + "Z" if text.endswith("+00:00") else text
        return text

    body = _ENCODER.encode({"messages": [_delivery(m, _DATA_STANDIN, time_text) for m in messages]})
    pieces = body.split(_DATA_STANDIN_ENCODED)
    if len(pieces) != len(messages) + 1:
        # A key or header holds the stand-in's text: no telling the pieces apart.
        return _RENDERER.render({"messages": [message_delivery(m) for m in messages]})
    spliced = [pieces[0]]
    for message, piece in zip(messages, pieces[1:], strict=True):
        spliced += (message.data, piece)
    # As DRF does, so the answer is also a strict JavaScript subset.
    return "".join(spliced).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").encode()
