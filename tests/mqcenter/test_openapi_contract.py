"""The OpenAPI document states the rules the doors enforce (the disagreements a fuzzer found
between document and server, each named here); tests/security/test_schemathesis.py fuzzes
the whole of it against a running broker."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.test import override_settings
from drf_spectacular.generators import SchemaGenerator
from openapi_spec_validator import validate


def document() -> dict[str, Any]:
    return json.loads(json.dumps(SchemaGenerator().get_schema(request=None, public=True), default=str))


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return document()


def _parameter(doc: dict[str, Any], path: str, name: str) -> dict[str, Any]:
    [parameter] = [p for p in doc["paths"][path]["get"]["parameters"] if p["name"] == name]
    return parameter["schema"]


def test_it_is_a_valid_openapi_document(doc):
    validate(doc)


def test_search_parameters_have_the_types_the_server_reads(doc):
    for path in ("/api/v1/messages", "/api/v1/archive/messages"):
        assert _parameter(doc, path, "added_after")["pattern"].startswith("^$|^")  # empty, or RFC 3339
    assert _parameter(doc, "/api/v1/archive/messages", "finished_before")["pattern"].startswith("^$|^")


# A query string's empty field is "no filter"; a number is ASCII digits only, which int()
# alone would not enforce (a fuzzer sent "priority=" to a document that declared an integer).
NUMBERS = ["", "0", "7", "09", "0009", "10", "123456789", "-1", "+5", " 5", "5 ", "1_0", "1.0", "x",
           "\u0663", "\u00b2", "\uff15"]


@pytest.mark.parametrize("path,name", [("/api/v1/messages", "id"), ("/api/v1/archive/messages", "id"),
                                       ("/api/v1/messages", "priority"), ("/api/v1/archive/messages", "priority")])
def test_a_search_number_pattern_accepts_what_the_server_accepts(doc, path, name):
    from messages.filters import MessageFilter
    from mqcenter.core.errors import InvalidRequest

    schema = _parameter(doc, path, name)
    assert schema["type"] == "string"
    for value in NUMBERS:
        try:
            MessageFilter.parse({name: value})
            accepted = True
        except InvalidRequest:
            accepted = False
        assert bool(re.fullmatch(schema["pattern"], value)) == accepted, value


def test_ack_results_are_one_to_a_thousand_items_and_delay_goes_with_retry_only(doc):
    schemas = doc["components"]["schemas"]
    results = schemas["AckRequestRequest"]["properties"]["results"]
    assert (results["minItems"], results["maxItems"]) == (1, 1000)
    retry, done = schemas["AckItemRequest"]["anyOf"]
    assert retry["properties"]["status"]["enum"] == ["RETRY"] and "delay_seconds" in retry["required"]
    assert done["properties"]["status"]["enum"] == ["SUCCESS", "FAIL"]
    assert done["properties"]["delay_seconds"] == {"nullable": True, "enum": [None], "description": "Only with RETRY."}
    assert retry["properties"]["id"] == {"type": "integer", "minimum": 1, "maximum": 2**63 - 1}


def test_every_answer_a_door_gives_is_listed(doc):
    heartbeat = doc["paths"]["/api/v1/registry/consumers"]["post"]["responses"]
    assert "409" in heartbeat  # the topic is being deleted
    for item in doc["paths"].values():
        for method, operation in item.items():
            if method in ("get", "post", "patch", "delete"):
                assert {"400", "401", "403", "404"} <= operation["responses"].keys(), operation["operationId"]


def test_bodies_refuse_unknown_fields_except_on_the_hot_path(doc):
    schemas = doc["components"]["schemas"]
    for name in ("ProduceMessageRequest", "TopicRequest", "PatchedTopicUpdateRequest", "ScheduleRequest",
                 "BulkRequestRequest", "GroupCreateRequest", "PatchedGroupUpdateRequest"):
        assert schemas[name]["additionalProperties"] is False, name
    for name in ("PullRequestRequest", "AckRequestRequest", "HeartbeatRequest", "ProduceRequestRequest"):
        assert "additionalProperties" not in schemas[name], name
    assert schemas["BulkRequestRequest"]["oneOf"] == [{"required": ["ids"]}, {"required": ["filter"]}]
    assert "group" not in schemas["PatchedGroupUpdateRequest"]["properties"]
    assert "name" not in schemas["PatchedBizRequest"]["properties"]


def test_links_lead_from_what_creates_ids_to_what_takes_them(doc):
    produced = doc["paths"]["/api/v1/messages"]["post"]["responses"]["201"]["links"]
    assert produced["MessageDetail"] == {"operationId": "message_detail",
                                         "parameters": {"message_id": "$response.body#/messages/0/id"}}
    assert produced["TransactionCommit"]["parameters"] == {"transaction_id": "$response.body#/transaction_id"}
    pulled = doc["paths"]["/api/v1/pull"]["post"]["responses"]["200"]["links"]
    assert pulled["Ack"]["requestBody"]["results"] == [{"id": "$response.body#/messages/0/id", "status": "SUCCESS"}]
    operations = {op["operationId"] for item in doc["paths"].values() for op in item.values() if isinstance(op, dict)}
    for item in doc["paths"].values():
        for operation in item.values():
            for answer in operation.get("responses", {}).values() if isinstance(operation, dict) else ():
                for link in answer.get("links", {}).values():
                    assert link["operationId"] in operations, link


def test_urls_follow_the_operators_allow_lists(doc):
    schemas = doc["components"]["schemas"]
    assert schemas["TopicRequest"]["properties"]["alarm_webhooks"]["maxItems"] == 0
    assert "transaction" not in schemas["ProduceRequestRequest"]["properties"]
    with override_settings(MQ_TRANSACTION_CHECK_HOSTS=["app.example.com"], MQ_ALARM_WEBHOOK_HOSTS=["hooks.example.com:8443"]):
        allowed = document()["components"]["schemas"]
    check_url = allowed["ProduceRequestRequest"]["properties"]["transaction"]["properties"]["check_url"]
    assert check_url["pattern"] == r"^(http://app\.example\.com(:80)?|https://app\.example\.com(:443)?)(/[\x21-\x7e]*)?$"
    assert allowed["WebhookRequest"]["properties"]["url"]["pattern"] == r"^(https?://hooks\.example\.com:8443)(/[\x21-\x7e]*)?$"


def _view_of(path: str) -> Any:
    """The view class Django routes an operation's path to (its parameters given sample values)."""
    from django.urls import resolve

    sample = re.sub(r"\{[a-z_]*id\}", "1", path)
    return resolve(re.sub(r"\{[a-z_]+\}", "x", sample)).func.cls


def test_every_operation_lists_the_answers_given_before_its_view(doc):
    """413 wherever ApiGuardMiddleware refuses a too-large body (every API path, whatever the
    method), 429 wherever the view throttles: as the configuration says, operation by operation."""
    from django.conf import settings

    from mqcenter.middleware import API_PREFIXES, ApiGuardMiddleware

    guarded = f"{ApiGuardMiddleware.__module__}.{ApiGuardMiddleware.__name__}" in settings.MIDDLEWARE
    assert guarded and settings.REST_FRAMEWORK["DEFAULT_THROTTLE_CLASSES"]
    throttled = 0
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            responses = operation["responses"]
            if guarded and path.startswith(API_PREFIXES):
                assert "413" in responses, (operation["operationId"], "413")
                assert responses["413"]["content"] == responses["400"]["content"]  # the API.md error body
            if _view_of(path).throttle_classes:
                throttled += 1
                assert "429" in responses, (operation["operationId"], "429")
    assert throttled > 50  # the global throttle reaches the views: the check above is not empty


def test_a_schedules_time_zone_is_one_the_document_lists(doc, shop_admin_api):
    from tests.support.api import expect_error

    zones = doc["components"]["schemas"]["ScheduleRequest"]["properties"]["timezone"]["enum"]
    assert "Asia/Shanghai" in zones and "UTC" in zones
    body = {"name": "tz", "topic": "orders.tz", "data": {}, "cron": "* * * * *"}
    for zone in ("posixrules", "right/UTC", "posix/Europe/Paris"):  # files of the zone database, not zone names
        assert zone not in zones
        expect_error(shop_admin_api.post("/api/v1/schedules", {**body, "timezone": zone}), 400, "invalid_request",
                     "timezone")
    assert shop_admin_api.post("/api/v1/schedules", {**body, "timezone": "Asia/Shanghai"}).status_code == 201
