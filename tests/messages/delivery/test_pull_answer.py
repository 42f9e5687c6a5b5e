"""`pull_answer` writes the bytes DRF's renderer writes for the same messages, whatever they hold."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from rest_framework.renderers import JSONRenderer

from messages.delivery.answers import message_delivery, pull_answer
from messages.delivery.validation import data_text
from messages.models import Message

NOW = datetime(2026, 11, 22, 23, 59, 58, 123456, tzinfo=UTC)
STANDIN = "\x00mq-data\x00"


def message(n: int, data: object, **fields: object) -> Message:
    values = {
        "id": n, "topic": "orders", "group_name": "default", "data": data_text(data), "key": f"k{n}",
        "headers": {"trace": f"t{n}"}, "attempt": 1, "retry_remaining": 3, "timeout_seconds": 60,
        "effect_time": NOW, "add_time": NOW - timedelta(seconds=n), "lease_expires_at": NOW + timedelta(seconds=60),
    }
    return Message(**{**values, **fields})


def drf(messages: list[Message]) -> bytes:
    return JSONRenderer().render({"messages": [message_delivery(m) for m in messages]})


DATA = [
    {"n": 1, "nested": [{"a": [1, 2.5, -0.0, 1e300, None, True]}], "big": 2**70},
    "plain text with \"quotes\", \\backslashes\\ and a\ttab",
    "non-ASCII: żółć, 日本語, emoji 🚀, and line separators \u2028 \u2029",
    [],
    0,
    None,
    STANDIN,  # the data itself may hold the stand-in's text: it is spliced in after the split
    {"k": STANDIN, STANDIN: [STANDIN]},
]


@pytest.mark.parametrize("data", DATA, ids=range(len(DATA)))
def test_it_renders_a_message_as_drf_does(data):
    messages = [message(1, data), message(2, {"other": True})]
    assert pull_answer(messages) == drf(messages)
    assert json.loads(pull_answer(messages))["messages"][0]["data"] == data


@pytest.mark.parametrize(
    "fields",
    [
        {"lease_expires_at": None},
        {"key": "ключ \u2028", "headers": {"ü": "\u2029", "n": "1"}},
        {"headers": None},
        {"key": STANDIN},  # the stand-in in a field it encodes: rendered the plain way
        {"headers": {STANDIN: STANDIN}},
        {"effect_time": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)},  # no microseconds
    ],
)
def test_it_renders_every_field_as_drf_does(fields):
    messages = [message(1, {"a": 1}, **fields), message(2, "two"), message(3, "three", **fields)]
    assert pull_answer(messages) == drf(messages)


def test_it_renders_no_messages_and_many():
    assert pull_answer([]) == drf([]) == b'{"messages":[]}'
    many = [message(n, {"n": n, "pad": "x" * 200}) for n in range(1, 1001)]
    assert pull_answer(many) == drf(many)


@pytest.mark.parametrize("data", DATA, ids=range(len(DATA)))
def test_data_is_stored_as_the_json_encoder_writes_it(data):
    # data_text calls the C encoder directly; it must write what json.dumps writes
    assert data_text(data) == json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


@pytest.mark.parametrize(("data", "error"), [
    (float("nan"), ValueError), ({"x": [float("inf")]}, ValueError), ({"x": object()}, TypeError),
    ({(1, 2): 1}, TypeError),
])
def test_data_that_is_no_json_value_is_refused(data, error):
    with pytest.raises(error):
        data_text(data)


def test_data_nested_too_deeply_is_refused():
    deep: list[object] = []
    inner = deep
    for _ in range(100_000):
        inner.append([])
        inner = inner[0]  # type: ignore[assignment]
    with pytest.raises(RecursionError):
        data_text(deep)
