"""Schemathesis hooks of the contract test (also for a manual run:
`SCHEMATHESIS_HOOKS=tests.security.contract_hooks st run ...`).

JSON Schema cannot state rules relative to the clock or to another request; the document
says them in words, and these hooks keep generated values inside them, valid stays valid and
invalid stays invalid:
- an expiry (`expires_at`, `ttl_seconds`) must end after the message comes due, a group's
  `start` must not be in the future: generated times are moved into the accepted window;
- a subscription filter's `expression` parses: generated ones become `tag = 'created'`;
- a schedule's `cron` the document's pattern allows (croniter's syntax, a superset) but the
  server refuses (a field out of its range, a day that does not exist) becomes `*/15 * * * *`;
- a search `cursor` is one the API returned: generated ones are dropped; a topic's `biz`
  names a business line that exists: generated names become null (none); header names are
  not empty, single lines of at most 128 characters (OpenAPI 3.0 cannot constrain names); a
  topic lists each webhook URL and each group name once (JSON Schema's uniqueness is of
  whole items);
- long-polls are cut to MAX_WAIT_SECONDS, so the run stays minutes long.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import schemathesis

from messages.schedules.cron import cron_problem
from mqcenter.openapi_patterns import CRON

MAX_WAIT_SECONDS = 0.2
PAST = "2000-01-01T00:00:00Z"
FAR = "2999-01-01T00:00:00Z"
MAX_SECONDS = 365 * 86400


def _moment(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _first_of_each(body: dict[str, Any], field: str, name: str) -> None:
    """Keep the first item of `body[field]` for each value of its `name` (JSON Schema's
    uniqueness is of whole items); items without a string `name` stay for the server to judge."""
    items = body.get(field)
    if not isinstance(items, list):
        return
    seen: set[str] = set()
    body[field] = [i for i in items if not isinstance(i, dict) or not isinstance(i.get(name), str)
                   or not (i[name] in seen or seen.add(i[name]))]


def _produce_item(item: Any) -> None:
    if not isinstance(item, dict):
        return
    headers = item.get("headers")
    if isinstance(headers, dict):  # names: at most 128 characters, single lines, no NUL
        for name in [n for n in headers if len(n) > 128 or any(c in n for c in "\x00\r\n")]:
            del headers[name]
    if _moment(item.get("expires_at")) is not None:
        item["expires_at"] = FAR
        if _moment(item.get("effect_time")) is not None:
            item["effect_time"] = PAST
    if _number(item.get("ttl_seconds")) and 0 < item["ttl_seconds"] <= MAX_SECONDS:
        item["ttl_seconds"] = MAX_SECONDS
        if _number(item.get("delay_seconds")) and 0 <= item["delay_seconds"] <= MAX_SECONDS:
            item["delay_seconds"] = 0
        if _moment(item.get("effect_time")) is not None:
            item["effect_time"] = PAST


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: Any = None) -> None:
    if isinstance(case.query, dict):
        case.query.pop("cursor", None)
    body = case.body
    if not isinstance(body, dict):
        return
    path, method = case.operation.path, case.operation.method.lower()
    if path in ("/api/v1/messages", "/api/v1/batches") and method == "post" and isinstance(body.get("messages"), list):
        for item in body["messages"]:
            _produce_item(item)
    for field in ("start", "since"):  # a group's replay point, not in the future
        moment = _moment(body.get(field))
        if moment is not None and moment.year > 2000:
            body[field] = PAST
    if path.startswith("/api/v1/schedules") and isinstance(body.get("headers"), dict):
        for name in [n for n in body["headers"] if not n or len(n) > 1024 or "\n" in n]:
            del body["headers"][name]  # names: single lines of 1-1,024 characters (OpenAPI 3.0 cannot say it)
    cron = body.get("cron")
    if (path.startswith("/api/v1/schedules") and isinstance(cron, str) and len(cron) <= 200
            and re.search(CRON, cron) and cron_problem(cron)):
        body["cron"] = "*/15 * * * *"  # the syntax is right, a range or the calendar is not
    spec = body.get("filter")
    if path.startswith("/api/v1/topics/") and isinstance(spec, dict) and isinstance(spec.get("expression"), str):
        spec["expression"] = "tag = 'created'"  # one that parses (the grammar is not JSON Schema's)
    if path.startswith("/api/v1/topics"):  # each webhook URL once, each group name once
        _first_of_each(body, "alarm_webhooks", "url")
        _first_of_each(body, "groups", "group")
    if path in ("/api/v1/topics", "/api/v1/topics/{topic}") and isinstance(body.get("biz"), str):
        body["biz"] = None  # generated names name no business line; null is "none"
    wait = body.get("wait_seconds")
    if _number(wait) and MAX_WAIT_SECONDS < wait <= 30:
        body["wait_seconds"] = MAX_WAIT_SECONDS
