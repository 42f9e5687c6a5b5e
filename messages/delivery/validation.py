"""Parsing of the hot-path request bodies (produce, pull, ack, extend, release).

DRF serializers cost tens of microseconds per field; a 1,000-message produce would spend
more time validating than storing. These plain checks do the same validation the OpenAPI
serializers describe, and name the failing field in API.md's notation.
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from messages.delivery.acks import AckResult
from messages.delivery.dedup import CONFLICT_MODES, MAX_DEDUP_SECONDS
from messages.delivery.produce import ProduceItem
from messages.models import DEFAULT_PRIORITY, MAX_PRIORITY
from messages.routing.filters import tag_check
from mqcenter.core.dates import parse_iso_datetime
from mqcenter.core.errors import InvalidRequest, PayloadTooLarge

# A topic or group name; NAME_PATTERN is the same rule as OpenAPI states it.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}\Z")
CONSUMER_RE = re.compile(r"^[A-Za-z0-9_.:@/\-]{1,200}\Z")
MAX_KEY_LENGTH = 128
MAX_DEDUP_LENGTH = 200
MAX_HEADERS = 32
MAX_HEADER_LENGTH = 1024
MAX_DELAY_SECONDS = 365 * 86400
MAX_TIMEOUT_SECONDS = 7 * 86400
MAX_RETRY_COUNT = 1000
MAX_LOG_LENGTH = 64 * 1024
MAX_IDS = 1000
MISSING = object()
PRODUCE_FIELDS = {
    "topic", "data", "group", "key", "headers", "delay_seconds", "effect_time",
    "retry_count", "timeout_seconds", "dedup_key", "broadcast", "priority", "ttl_seconds", "expires_at",
    "tag", "dedup_seconds", "dedup_conflict", "reply_to", "correlation_id",
}
# Request/reply rides in two headers, which deliveries also answer as `reply_to` and
# `correlation_id` (messages/delivery/answers.py).
REPLY_TO_HEADER = "mq-reply-to"
CORRELATION_HEADER = "mq-correlation-id"
MAX_CORRELATION_LENGTH = 128


# One encoder for all: json.dumps with any option builds a new encoder per call.
_DATA_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def data_text(value: Any) -> str:
    """Serialize a message's data the one way the broker stores it."""
    return _DATA_ENCODER.encode(value)


def data_size_check(data: str, field: str) -> None:
    """Refuse (413) message data over MQ_MAX_DATA_BYTES serialized, on every door that stores it."""
    # A character is at most 4 bytes in UTF-8: only long data needs encoding to be measured.
    if len(data) * 4 > settings.MQ_MAX_DATA_BYTES and len(data.encode()) > settings.MQ_MAX_DATA_BYTES:
        raise PayloadTooLarge(
            f"{field} is {len(data.encode())} bytes serialized; the limit is {settings.MQ_MAX_DATA_BYTES}.",
            details={"field": field},
        )


def _fail(field: str, message: str) -> InvalidRequest:
    return InvalidRequest(f"{field}: {message}", details={"field": field})


def body_object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise InvalidRequest("The body must be a JSON object.", details={"field": ""})
    return body


def no_fields(body: Any) -> None:
    """An action endpoint's body: nothing, or an empty JSON object."""
    if body_object(body):
        field = sorted(body)[0]
        raise _fail(field, "is not a field of this request (it takes no body).")


def name(value: Any, field: str) -> str:
    if not isinstance(value, str) or not NAME_RE.match(value):
        raise _fail(field, "is required." if value in (None, "") else "must match ^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$.")
    return value


def consumer_id(value: Any, field: str = "consumer") -> str:
    if not isinstance(value, str) or not CONSUMER_RE.match(value):
        raise _fail(field, "must be 1-200 characters of letters, digits and _.:@/-.")
    return value


def text(value: Any, field: str, max_length: int, *, single_line: bool = True) -> str:
    if not isinstance(value, str):
        raise _fail(field, "must be a string.")
    if len(value) > max_length:
        raise _fail(field, f"must be at most {max_length} characters.")
    if "\x00" in value or (single_line and ("\r" in value or "\n" in value)):
        raise _fail(field, "must not contain NUL or line breaks.")
    return value


def integer(value: Any, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(field, "must be an integer.")
    if not low <= value <= high:
        raise _fail(field, f"must be between {low} and {high}.")
    return value


def number(value: Any, field: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(field, "must be a number.")
    if not low <= value <= high:
        raise _fail(field, f"must be between {low} and {high}.")
    return float(value)


def moment(value: Any, field: str) -> datetime:
    parsed = parse_iso_datetime(value)
    if parsed is None or parsed.tzinfo is None:
        raise _fail(field, "must be an ISO 8601 datetime with offset.")
    return parsed


def ids_list(value: Any, field: str = "ids") -> list[int]:
    if not isinstance(value, list) or not value:
        raise _fail(field, "must be a non-empty list of message ids.")
    if len(value) > MAX_IDS:
        raise _fail(field, f"at most {MAX_IDS} ids.")
    return [integer(v, f"{field}[{i}]", 1, 2**63 - 1) for i, v in enumerate(value)]


def produce_items(body: Any) -> list[ProduceItem]:
    messages = body_object(body).get("messages", MISSING)
    if not isinstance(messages, list) or not messages:
        raise _fail("messages", "must be a non-empty list.")
    if len(messages) > settings.MQ_MAX_PRODUCE_BATCH:
        raise _fail("messages", f"at most {settings.MQ_MAX_PRODUCE_BATCH} messages per call.")
    return [produce_item(item, f"messages[{index}]") for index, item in enumerate(messages)]


def produce_item(item: Any, path: str) -> ProduceItem:
    if not isinstance(item, dict):
        raise _fail(path, "must be an object.")
    unknown = item.keys() - PRODUCE_FIELDS
    if unknown:
        raise _fail(f"{path}.{sorted(unknown)[0]}", "is not a message field.")
    if "data" not in item:
        raise _fail(f"{path}.data", "is required.")
    try:
        data = data_text(item["data"])
    except (ValueError, TypeError, RecursionError) as exc:
        raise _fail(f"{path}.data", "must be a JSON value.") from exc
    data_size_check(data, f"{path}.data")
    topic = name(item.get("topic"), f"{path}.topic")
    if len(item) == 2:  # the common message: topic and data only, nothing more to check
        return ProduceItem(topic, data)
    broadcast = item.get("broadcast", False)
    if not isinstance(broadcast, bool):
        raise _fail(f"{path}.broadcast", "must be true or false.")
    group = _optional(item, "group", path, name)
    if broadcast and group is not None:
        raise _fail(f"{path}.group", "must be absent when broadcast is true.")
    delay = _optional(item, "delay_seconds", path, lambda v, f: number(v, f, 0, MAX_DELAY_SECONDS))
    effect_time = _optional(item, "effect_time", path, moment)
    if delay is not None and effect_time is not None:
        raise _fail(f"{path}.effect_time", "give effect_time or delay_seconds, not both.")
    ttl, expires_at = _expiry(item, path, delay, effect_time)
    return ProduceItem(
        topic=topic,
        data=data,
        group=group,
        key=_optional(item, "key", path, lambda v, f: text(v, f, MAX_KEY_LENGTH)),
        headers=_reply_headers(item, path, headers(item.get("headers"), f"{path}.headers")),
        delay_seconds=delay,
        effect_time=effect_time,
        retry_count=_optional(item, "retry_count", path, lambda v, f: integer(v, f, 0, MAX_RETRY_COUNT)),
        timeout_seconds=_optional(
            item, "timeout_seconds", path, lambda v, f: integer(v, f, 1, MAX_TIMEOUT_SECONDS)
        ),
        dedup_key=_optional(item, "dedup_key", path, lambda v, f: text(v, f, MAX_DEDUP_LENGTH)),
        broadcast=broadcast,
        priority=integer(item.get("priority", DEFAULT_PRIORITY), f"{path}.priority", 0, MAX_PRIORITY),
        ttl_seconds=ttl,
        expires_at=expires_at,
        tag=_optional(item, "tag", path, tag_check),
        **_dedup_window(item, path),
    )


def _reply_headers(item: dict[str, Any], path: str, given: dict[str, str]) -> dict[str, str]:
    """`reply_to` (a topic) and `correlation_id` into the message's headers; a `reply_to`
    without a correlation id gets a new one."""
    reply_to = _optional(item, "reply_to", path, name)
    correlation = _optional(item, "correlation_id", path, lambda v, f: text(v, f, MAX_CORRELATION_LENGTH))
    if reply_to is None and correlation is None:
        return given
    out = dict(given)
    if reply_to is not None:
        out[REPLY_TO_HEADER] = reply_to
        correlation = correlation or uuid.uuid4().hex
    out[CORRELATION_HEADER] = correlation  # type: ignore[assignment]
    return out


def _dedup_window(item: dict[str, Any], path: str) -> dict[str, Any]:
    """`dedup_seconds` (with a `dedup_key`) and `dedup_conflict`, when given."""
    out: dict[str, Any] = {}
    seconds = _optional(item, "dedup_seconds", path, lambda v, f: integer(v, f, 1, MAX_DEDUP_SECONDS))
    if seconds is not None:
        if item.get("dedup_key") is None:
            raise _fail(f"{path}.dedup_seconds", "needs a dedup_key.")
        out["dedup_seconds"] = seconds
    conflict = item.get("dedup_conflict")
    if conflict is not None:
        if conflict not in CONFLICT_MODES:
            raise _fail(f"{path}.dedup_conflict", 'must be "first" or "reject".')
        out["dedup_conflict"] = conflict
    return out


def _expiry(
    item: dict[str, Any], path: str, delay: float | None, effect_time: datetime | None
) -> tuple[float | None, datetime | None]:
    """`ttl_seconds` or `expires_at` (not both): an expiry in the future and after the
    message comes due, or it could never be delivered."""
    ttl = _optional(item, "ttl_seconds", path, lambda v, f: number(v, f, 0, MAX_DELAY_SECONDS))
    expires_at = _optional(item, "expires_at", path, moment)
    if ttl is None and expires_at is None:
        return None, None
    if ttl is not None and expires_at is not None:
        raise _fail(f"{path}.expires_at", "give expires_at or ttl_seconds, not both.")
    now = timezone.now()
    field = f"{path}.ttl_seconds" if ttl is not None else f"{path}.expires_at"
    expiry = now + timedelta(seconds=ttl) if ttl is not None else expires_at
    if ttl == 0:
        raise _fail(field, "must be more than 0 seconds.")
    if expiry <= now:  # type: ignore[operator]
        raise _fail(field, "must lie in the future.")
    if expiry <= (effect_time or now + timedelta(seconds=delay or 0)):  # type: ignore[operator]
        raise _fail(field, "must end after the message comes due (effect_time / delay_seconds).")
    return ttl, expires_at


def _optional(item: dict[str, Any], key: str, path: str, check: Any) -> Any:
    value = item.get(key)
    return None if value is None else check(value, f"{path}.{key}")


def headers(value: Any, field: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _fail(field, "must be an object of string to string.")
    if len(value) > MAX_HEADERS:
        raise _fail(field, f"at most {MAX_HEADERS} headers.")
    for key, item in value.items():
        text(key, f"{field}.{key}", 128)
        text(item, f"{field}.{key}", MAX_HEADER_LENGTH)
    return value


def pull_request(body: Any) -> dict[str, Any]:
    body = body_object(body)
    return {
        "topic": name(body.get("topic"), "topic"),
        "group": name(body.get("group", "default"), "group"),
        "consumer": consumer_id(body.get("consumer")),
        "max_messages": integer(body.get("max_messages", 1), "max_messages", 1, settings.MQ_MAX_PULL),
        "wait_seconds": number(body.get("wait_seconds", 0), "wait_seconds", 0, settings.MQ_MAX_WAIT_SECONDS),
        # An extension of API.md: a pull may carry the consumer's acks (see `pull.messages_pull`).
        "results": None if body.get("results", []) == [] else ack_results(body["results"]),
    }


def ack_request(body: Any) -> tuple[str, list[AckResult]]:
    body = body_object(body)
    return consumer_id(body.get("consumer")), ack_results(body.get("results"))


def ack_results(results: Any) -> list[AckResult]:
    if not isinstance(results, list) or not results:
        raise _fail("results", "must be a non-empty list.")
    if len(results) > MAX_IDS:
        raise _fail("results", f"at most {MAX_IDS} results per call.")
    parsed = []
    for index, result in enumerate(results):
        # A steady consumer's results are all {"id": n, "status": "SUCCESS"}: taken as they
        # are, without the field-by-field checks below (that would find nothing wrong).
        if type(result) is dict and len(result) == 2 and result.get("status") == "SUCCESS":
            id_ = result.get("id")
            if type(id_) is int and 1 <= id_ < 2**63:
                parsed.append(AckResult(id_, "SUCCESS"))
                continue
        path = f"results[{index}]"
        if not isinstance(result, dict):
            raise _fail(path, "must be an object.")
        status = result.get("status")
        if status not in ("SUCCESS", "FAIL", "RETRY"):
            raise _fail(f"{path}.status", "must be SUCCESS, FAIL or RETRY.")
        delay = result.get("delay_seconds")
        if status == "RETRY":
            if delay is None:
                raise _fail(f"{path}.delay_seconds", "is required with status RETRY (a snooze).")
            delay = number(delay, f"{path}.delay_seconds", 0, settings.MQ_MAX_SNOOZE_SECONDS)
        elif delay is not None:
            raise _fail(f"{path}.delay_seconds", "goes only with status RETRY.")
        log = result.get("log")
        log = "" if log is None else log  # not `or ""`: {} or false must be refused, not dropped
        retry = result.get("retry", True)
        if not isinstance(retry, bool):
            raise _fail(f"{path}.retry", "must be true or false.")
        parsed.append(
            AckResult(
                id=integer(result.get("id"), f"{path}.id", 1, 2**63 - 1),
                status=status,
                log=text(log, f"{path}.log", MAX_LOG_LENGTH, single_line=False),
                retry=retry,
                delay_seconds=delay,
            )
        )
    return parsed


def extend_request(body: Any) -> dict[str, Any]:
    body = body_object(body)
    return {
        "consumer": consumer_id(body.get("consumer")),
        "ids": ids_list(body.get("ids")),
        "seconds": integer(body.get("seconds", 60), "seconds", 1, 12 * 3600),
    }


def release_request(body: Any) -> dict[str, Any]:
    body = body_object(body)
    return {"consumer": consumer_id(body.get("consumer")), "ids": ids_list(body.get("ids"))}


def int_param(value: str | None, field: str, default: int) -> int:
    """An integer query parameter, `default` when absent."""
    if value is None:
        return default
    try:
        return int(value)  # "" too is refused: the parameter is documented as an integer
    except ValueError as exc:
        raise InvalidRequest(f"{field} must be an integer.", details={"field": field}) from exc
