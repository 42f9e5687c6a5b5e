"""The OpenAPI document as the contract: what the serializers cannot say, added to the
generated document (a drf-spectacular postprocessing hook).

The serializers give each field its type and bounds; this adds what the doors check beyond
them, so that a client generated from `/api/schema/` or a schema-driven tester sends what
the server accepts and expects what it answers:
- request bodies refuse unknown fields (`additionalProperties: false`), as every door does;
- strings refuse NUL (and, where the server trims them, blank values), as the doors do;
- rules between fields (`ids` or `filter`, `effect_time` or `delay_seconds`, RETRY with a
  `delay_seconds`), query and path parameters' types and ranges;
- `links` from the operations that create or return ids to those that take them;
- examples of the main requests.
Time-relative rules (an expiry after the message comes due, a group's `start` not in the
future) cannot be stated in JSON Schema: the field descriptions say them.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from django.conf import settings

from messages.delivery.validation import MAX_DEDUP_LENGTH, MAX_KEY_LENGTH, NAME_PATTERN
from mqcenter.openapi_examples import EXAMPLES, LINKS
from mqcenter.openapi_patterns import (
    CRON,
    CRON_TEXT,
    DATETIME,
    DATETIME_PATTERN,
    DATETIME_TEXT,
    MAX_DATETIME_LENGTH,
    QUERY_TIME,
)

MAX_ID = 2**63 - 1
ID = {"type": "integer", "minimum": 1, "maximum": MAX_ID}
NAME = {"type": "string", "pattern": NAME_PATTERN}
CONSUMER = {"type": "string", "pattern": r"^[A-Za-z0-9_.:@/\-]{1,200}$"}
# DRF's CharField: no NUL; with allow_blank off, not only white space (it trims).
TEXT = r"^[^\x00]*$"
NONBLANK_TEXT = r"^[^\x00]*[^\x00\s][^\x00]*$"
LINE = r"^[^\x00\r\n]*$"
STATUSES = ["NEW", "RUNNING", "SUCCESS", "FAIL", "TIMEOUT", "EXPIRED", "PREPARED", "CANCELLED"]

# Query parameters of the searches, as MessageFilter.parse reads them.
FILTER_PARAMETERS: dict[str, dict[str, Any]] = {
    "topic": {"type": "string"},
    "group": {"type": "string"},
    "key": {"type": "string"},
    "text": {"type": "string"},
    "status": {"type": "string", "pattern": "^((" + "|".join(STATUSES) + ")(,(" + "|".join(STATUSES) + "))*)?$",
               "description": "One status, or several separated by commas (empty: any)."},
    # Strings, as a query sends them: empty is "no filter", like the other fields.
    "id": {"type": "string", "pattern": "^[0-9]*$", "description": "A message id in ASCII digits (empty: any)."},
    "priority": {"type": "string", "pattern": "^(0*[0-9])?$", "description": "0-9 (empty: any)."},
    "added_after": QUERY_TIME,
    "added_before": QUERY_TIME,
    "finished_after": QUERY_TIME,
    "finished_before": QUERY_TIME,
    "limit": {"type": "integer", "description": "Page size, 50 by default; taken into 1-500."},
    "cursor": {"type": "string", "description": "The next_cursor of the previous page, as this API returned it "
               "(any other value answers 400)."},
}
PATH_PARAMETERS: dict[str, dict[str, Any]] = {
    "message_id": ID, "archived_id": ID, "job_id": ID, "schedule_id": ID, "biz_id": ID,
    "topic": NAME, "group": NAME, "consumer": CONSUMER,
    "transaction_id": {"type": "string", "pattern": r"^[A-Za-z0-9_-]{1,64}$"},
}


def contract_hook(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    schemas = result.get("components", {}).get("schemas", {})
    for name, schema in schemas.items():
        if name.endswith("Request") or name.startswith("Patched"):
            _request_component(schema, closed=name not in OPEN_BODIES)
    _field_rules(schemas)
    for item in result.get("paths", {}).values():
        for method, operation in item.items():
            if method in ("get", "post", "patch", "put", "delete"):
                _parameters(operation)
                _patch_needs_a_field(method, operation, schemas)
                _body_required(method, operation)
    _answers_before_the_view(result.get("paths", {}), generator)
    _links(result.get("paths", {}))
    for name, example in EXAMPLES.items():
        if name in schemas:
            schemas[name]["example"] = example
    return result


GUARD = "mqcenter.middleware.ApiGuardMiddleware"
TOO_LARGE = ("The request body is larger than the broker accepts (MQ_MAX_BODY_BYTES), judged from its "
             "Content-Length before it is read, whatever the method.")
TOO_MANY = "Too many requests with this token (MQ_TOKEN_RATE); Retry-After says when to try again."


def _answers_before_the_view(paths: dict[str, Any], generator: Any) -> None:
    """The answers a request can get before its view runs, listed on every operation they
    apply to, as the configuration says: 413 from ApiGuardMiddleware on the API's paths, 429
    from the view's throttles (REST_FRAMEWORK's DEFAULT_THROTTLE_CLASSES unless it sets its own)."""
    from mqcenter.middleware import API_PREFIXES

    views = {(path, method.lower()): getattr(callback, "cls", None)
             for path, _, method, callback in getattr(generator, "endpoints", None) or ()}
    for path, item in paths.items():
        for method, operation in item.items():
            # Status codes are still the views' (ints, or strings) until spectacular normalises them.
            responses = {str(code): answer for code, answer in operation.get("responses", {}).items()}
            if "400" not in responses:  # every door answers 400 with the error body
                continue
            added = {}
            if GUARD in settings.MIDDLEWARE and path.startswith(API_PREFIXES):
                added["413"] = TOO_LARGE
            view = views.get((path, method))
            if view is not None and getattr(view, "throttle_classes", None):
                added["429"] = TOO_MANY
            for code, text in added.items():
                if code not in responses:
                    operation["responses"][code] = {**copy.deepcopy(responses["400"]), "description": text}


def _body_required(method: str, operation: dict[str, Any]) -> None:
    """A POST without a body answers 400, as a message edit without one does; other PATCHes
    change nothing without one."""
    body = operation.get("requestBody")
    if body is not None and (method == "post" or operation.get("operationId") == "message_edit"):
        body["required"] = True


# The hot path's doors read the fields they know and ignore others (a newer client's fields
# reach an older broker harmlessly); every other door refuses unknown fields.
OPEN_BODIES = {"ProduceRequestRequest", "AckRequestRequest", "AckItemRequest", "PullRequestRequest", "ExtendRequestRequest",
               "ReleaseRequestRequest", "HeartbeatRequest", "SubscriptionRequest"}


def _request_component(schema: dict[str, Any], *, closed: bool) -> None:
    if closed and schema.get("type") == "object" and "properties" in schema:
        schema["additionalProperties"] = False
    for prop in schema.get("properties", {}).values():
        _strings(prop)


def _strings(prop: dict[str, Any]) -> None:
    """Strings refuse NUL; those the server trims refuse a blank value."""
    if prop.get("format") == "date-time":
        prop.update(pattern=DATETIME_PATTERN, maxLength=MAX_DATETIME_LENGTH)
        prop.setdefault("description", DATETIME_TEXT)
    if prop.get("type") == "string" and not {"pattern", "format", "enum"} & prop.keys():
        prop["pattern"] = NONBLANK_TEXT if prop.get("minLength", 0) >= 1 else TEXT
    if prop.get("type") == "array" and isinstance(prop.get("items"), dict):
        _strings(prop["items"])
    if isinstance(prop.get("additionalProperties"), dict):
        _strings(prop["additionalProperties"])


def _parameters(operation: dict[str, Any]) -> None:
    for parameter in operation.get("parameters", []):
        table = FILTER_PARAMETERS if parameter["in"] == "query" else PATH_PARAMETERS
        if parameter["name"] in table:
            parameter["schema"] = copy.deepcopy(table[parameter["name"]])


def _patch_needs_a_field(method: str, operation: dict[str, Any], schemas: dict[str, Any]) -> None:
    """A message edit with nothing in it answers 400 ("Nothing to change")."""
    if operation.get("operationId") != "message_edit":
        return
    ref = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {}).get("$ref")
    if ref:
        schemas[ref.rsplit("/", 1)[1]]["minProperties"] = 1


def _set(schemas: dict[str, Any], component: str, field: str, **rules: Any) -> None:
    prop = schemas.get(component, {}).get("properties", {}).get(field)
    if prop is not None:
        prop.update(rules)


def _field_rules(schemas: dict[str, Any]) -> None:
    # Produce: one message's fields as messages/delivery/validation.py checks them.
    for field, length in (("key", MAX_KEY_LENGTH), ("dedup_key", MAX_DEDUP_LENGTH)):
        _set(schemas, "ProduceMessageRequest", field, pattern=LINE, minLength=0, maxLength=length)
    item = schemas.get("ProduceMessageRequest")
    if item:
        item["properties"]["headers"] = {
            "type": "object", "nullable": True, "maxProperties": 32,
            "additionalProperties": {"type": "string", "maxLength": 1024, "pattern": LINE},
            "description": "At most 32 headers; names of at most 128 characters; values of at most 1,024.",
        }
        item["not"] = {"anyOf": [
            {"required": ["effect_time", "delay_seconds"], "properties": {
                "effect_time": {"type": "string"}, "delay_seconds": {"type": "number"}}},
            {"required": ["expires_at", "ttl_seconds"], "properties": {
                "expires_at": {"type": "string"}, "ttl_seconds": {"type": "number"}}},
            {"required": ["broadcast", "group"], "properties": {
                "broadcast": {"enum": [True]}, "group": {"type": "string"}}},
            # dedup_seconds needs a dedup_key.
            {"required": ["dedup_seconds"], "properties": {"dedup_seconds": {"type": "integer"}},
             "not": {"required": ["dedup_key"]}},
            {"required": ["dedup_seconds", "dedup_key"], "properties": {
                "dedup_seconds": {"type": "integer"}, "dedup_key": {"enum": [None]}}},
        ]}
        _set(schemas, "ProduceMessageRequest", "correlation_id", minLength=0, pattern=LINE)
        _set(schemas, "ProduceMessageRequest", "dedup_conflict", nullable=True)
    _set(schemas, "BatchCreateRequest", "messages", minItems=1, maxItems=settings.MQ_MAX_PRODUCE_BATCH)
    _set(schemas, "BatchCreateRequest", "callback_topic", **NAME)
    _set(schemas, "BatchCreateRequest", "batch_id", pattern=r"^[A-Za-z0-9_.:-]{1,64}$", nullable=True)
    # Acks: RETRY takes delay_seconds; SUCCESS and FAIL take none: two shapes of one item.
    ack = schemas.get("AckItemRequest")
    if ack:
        props = ack["properties"]
        props["id"] = dict(ID)
        props["log"]["pattern"] = TEXT
        retry = copy.deepcopy(props)
        retry["status"] = {"type": "string", "enum": ["RETRY"]}
        retry["delay_seconds"].update(maximum=settings.MQ_MAX_SNOOZE_SECONDS)
        retry["delay_seconds"].pop("nullable", None)
        done = copy.deepcopy(props)
        done["status"] = {"type": "string", "enum": ["SUCCESS", "FAIL"]}
        done["delay_seconds"] = {"nullable": True, "enum": [None], "description": "Only with RETRY."}
        schemas["AckItemRequest"] = {"anyOf": [
            {"type": "object", "title": "AckRetry", "properties": retry, "required": ["id", "status", "delay_seconds"],
             "description": "A snooze: deliver again after delay_seconds, spending no retry."},
            {"type": "object", "title": "AckResult", "properties": done, "required": ["id", "status"]},
        ]}
    for component in ("AckRequestRequest",):
        _set(schemas, component, "results", minItems=1, maxItems=1000)
    for component in ("ExtendRequestRequest", "ReleaseRequestRequest"):
        _set(schemas, component, "ids", minItems=1, maxItems=1000, items=ID)
    # Bulk operations: ids or filter, exactly one.
    for component in ("BulkRequestRequest", "MoveRequestRequest", "ArchiveRedriveRequestRequest"):
        schema = schemas.get(component)
        if schema:
            schema["properties"]["ids"].update(minItems=1, maxItems=1000, items=ID)
            schema["oneOf"] = [{"required": ["ids"]}, {"required": ["filter"]}]
            schema["properties"]["filter"] = _filter(archive=component.startswith("Archive"))
    _topics(schemas)
    _groups(schemas)
    _schedules(schemas)
    _registry(schemas)
    _produce_transaction(schemas)
    # A business line's and a topic's name is its identity: a PATCH cannot change it.
    schemas.get("PatchedBizRequest", {}).get("properties", {}).pop("name", None)
    schemas.get("PatchedTopicUpdateRequest", {}).get("properties", {}).pop("topic", None)
    _set(schemas, "ProduceRequestRequest", "messages", minItems=1, maxItems=settings.MQ_MAX_PRODUCE_BATCH)
    for field in ("ttl_seconds",):
        _set(schemas, "ProduceMessageRequest", field, exclusiveMinimum=True, maximum=365 * 86400, description=(
            "Seconds from now; must end after the message comes due (delay_seconds). Not delivered by then: EXPIRED."))
    _set(schemas, "ProduceMessageRequest", "expires_at", description=(
        "In the future, and after the message comes due (effect_time / delay_seconds). Not delivered by then: EXPIRED."))


def _filter(*, archive: bool) -> dict[str, Any]:
    """A bulk operation's JSON filter: MessageFilter.parse with blank_is_absent=False."""
    text = {"type": "string", "minLength": 1, "nullable": True}
    moment = {**DATETIME, "nullable": True}
    props: dict[str, Any] = {
        "topic": text, "group": text, "key": text, "text": text,
        "status": {"type": "array", "items": {"type": "string", "enum": STATUSES}, "nullable": True},
        "id": {"type": "integer", "nullable": True},
        "priority": {"type": "integer", "minimum": 0, "maximum": 9, "nullable": True},
        "added_after": moment, "added_before": moment,
    }
    if archive:
        props.update(finished_after=moment, finished_before=moment)
    present = {"string": {"type": "string"}, "array": {"type": "array", "minItems": 1},
               "integer": {"type": "integer"}}
    return {
        "type": "object", "properties": copy.deepcopy(props), "additionalProperties": False,
        "description": "At least one field with a value: an empty filter would take every message.",
        "anyOf": [{"required": [name], "properties": {name: present[prop["type"]]}} for name, prop in props.items()],
    }


def _url_pattern(setting: str) -> str | None:
    """The URLs an allow-list setting lets the broker call, as a pattern; None when it is
    empty (no URL is accepted)."""
    from mqcenter.core.outbound import allow_list

    entries = allow_list(setting).entries
    if not entries:
        return None
    tail = r"(/[\x21-\x7e]*)?$"
    if any(e.network is not None or e.biz is not None or e.port == 0 for e in entries):
        return r"^https?://[\x21-\x7e]+$"  # the host is checked against the list
    hosts = []
    for entry in entries:
        name = re.escape(entry.name or "")
        if entry.port is None:
            hosts += [f"http://{name}(:80)?", f"https://{name}(:443)?"]
        else:
            hosts.append(f"https?://{name}:{entry.port}")
    return "^(" + "|".join(hosts) + ")" + tail


def _topics(schemas: dict[str, Any]) -> None:
    pattern = _url_pattern("MQ_ALARM_WEBHOOK_HOSTS")
    for component in ("TopicRequest", "PatchedTopicUpdateRequest"):
        hooks = schemas.get(component, {}).get("properties", {}).get("alarm_webhooks")
        if hooks is None:
            continue
        if pattern is None:
            hooks["maxItems"] = 0
            hooks["description"] = "No webhook can be set: the operator has listed no hosts (MQ_ALARM_WEBHOOK_HOSTS)."
        else:
            schemas["WebhookRequest"]["properties"]["url"].update(pattern=pattern, maxLength=2000)


def _subscription_filter() -> dict[str, Any]:
    """A group's filter: messages/routing/filters.py's filter_parse."""
    from messages.routing.filters import MAX_FILTER_TAGS, TAG_RE

    return {"nullable": True, "description": 'null (none), {"tags": [...]} or {"expression": "..."}; an '
            "expression that does not parse answers 400 with details.position.",
            "oneOf": [
                {"type": "object", "additionalProperties": False, "required": ["tags"], "properties": {"tags": {
                    "type": "array", "minItems": 1, "maxItems": MAX_FILTER_TAGS,
                    "items": {"type": "string", "pattern": TAG_RE.pattern.replace("\\Z", "$")}}}},
                {"type": "object", "additionalProperties": False, "required": ["expression"],
                 "properties": {"expression": {"type": "string"}}},
            ]}


def _groups(schemas: dict[str, Any]) -> None:
    start = {"description": '"latest" (default), "earliest", or an ISO 8601 time with offset, not in the future.',
             "anyOf": [{"type": "string", "enum": ["latest", "earliest"]}, DATETIME], "nullable": True}
    _set(schemas, "GroupCreateRequest", "start", **start)
    for component in ("GroupCreateRequest", "PatchedGroupUpdateRequest"):
        if "filter" in schemas.get(component, {}).get("properties", {}):
            schemas[component]["properties"]["filter"] = _subscription_filter()
        _set(schemas, component, "mode", enum=["queue", "serial", "sharded"])
        _set(schemas, component, "max_in_flight", minimum=1, maximum=2**31 - 1)
        _set(schemas, component, "key_concurrency", minimum=1, maximum=2**31 - 1)
        _set(schemas, component, "rate_per_second", minimum=0.01, maximum=100_000)


def _schedules(schemas: dict[str, Any]) -> None:
    from messages.schedules.services import zone_names

    zones = sorted(zone_names())
    for component in ("ScheduleRequest", "PatchedScheduleRequest"):
        _set(schemas, component, "name", pattern=NAME_PATTERN)
        _set(schemas, component, "topic", pattern=NAME_PATTERN)
        _set(schemas, component, "group", pattern=NAME_PATTERN)
        _set(schemas, component, "cron", pattern=CRON, maxLength=200, description=CRON_TEXT)
        _set(schemas, component, "timezone", enum=zones)
        _set(schemas, component, "headers", maxProperties=30,
             description="At most 30 headers; names of 1 to 1,024 characters; values of at most 1,024; single lines.",
             additionalProperties={"type": "string", "maxLength": 1024, "pattern": r"^[^\n]*$"})


def _registry(schemas: dict[str, Any]) -> None:
    _set(schemas, "HeartbeatRequest", "consumer", **CONSUMER)
    _set(schemas, "SubscriptionRequest", "topic", **NAME)
    _set(schemas, "SubscriptionRequest", "group", **NAME)


def _produce_transaction(schemas: dict[str, Any]) -> None:
    """`transaction` on a produce, when the operator allows check-backs."""
    from messages.transactions.services import MAX_CHECK_AFTER_SECONDS

    pattern = _url_pattern("MQ_TRANSACTION_CHECK_HOSTS")
    body = schemas.get("ProduceRequestRequest")
    if pattern is None or body is None:
        return
    body["properties"]["transaction"] = {
        "type": "object", "nullable": True, "additionalProperties": False, "required": ["check_url"],
        "description": "Store the batch as PREPARED (a half message): commit or roll back by its transaction_id.",
        "properties": {
            "check_url": {"type": "string", "maxLength": 2000, "pattern": pattern},
            "check_after_seconds": {"type": "integer", "minimum": 1, "maximum": MAX_CHECK_AFTER_SECONDS, "default": 30},
        },
    }


def _links(paths: dict[str, Any]) -> None:
    for (path, method, status), links in LINKS.items():
        response = paths.get(path, {}).get(method, {}).get("responses", {}).get(status)
        if response is not None:
            response["links"] = copy.deepcopy(links)
