"""Property-based run of the live OpenAPI document against a real broker process.

Schemathesis generates valid and invalid requests for every operation of /api/schema/ and
sends them, with tokens of every scope, to `manage.py runbroker` on its own MariaDB
database. Nothing may answer 5xx, every 4xx carries the API.md error body, and every answer
matches the documented status codes, content type and response schema.
"""

from __future__ import annotations

import itertools
import json
import os
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support.server import BrokerServer

pytestmark = pytest.mark.e2e

# Per operation; raise it for a deeper (slower) run: MQ_SCHEMATHESIS_EXAMPLES=200.
MAX_EXAMPLES = int(os.environ.get("MQ_SCHEMATHESIS_EXAMPLES", "25"))
# Long-polls would make the run minutes long; the bounds themselves are tested elsewhere.
MAX_WAIT_SECONDS = 0.2
REDIS_DB_URL = "redis://127.0.0.1:6379/12"  # this suite's own Redis database


@pytest.fixture(scope="module")
def live_broker() -> Any:
    server = BrokerServer("schemathesis", extra_env={"REDIS_URL": REDIS_DB_URL, "CELERY_BROKER_URL": REDIS_DB_URL})
    server.setup()
    try:
        url = server.start()
        tokens = {
            "admin": server.token,
            "shop-admin": server.manage("createtoken", "--scope", "admin", "--biz", "shop").strip(),
            "produce": server.manage("createtoken", "--scope", "produce:*", "--biz", "shop").strip(),
            "consume": server.manage("createtoken", "--scope", "consume:*", "--biz", "shop").strip(),
        }
        _seed(server, url, tokens)
        yield url, tokens
    finally:
        server.teardown()


def _seed(server: BrokerServer, url: str, tokens: dict[str, str]) -> None:
    """Some data for the generated requests to find: a topic with groups, messages, a consumer."""
    with server.client(url, tokens["admin"]) as admin:
        assert admin.post("/api/v1/topics", json={
            "topic": "orders", "biz": "shop", "retry_count": 1,
            "groups": [{"group": "billing", "mode": "queue"}, {"group": "audit", "mode": "serial"}],
        }).status_code == 201
    with server.client(url, tokens["produce"]) as producer:
        response = producer.post("/api/v1/messages", json={"messages": [
            {"topic": "orders", "data": {"n": i}, "key": f"k{i % 3}"} for i in range(20)]})
        assert response.status_code == 201
    with server.client(url, tokens["consume"]) as consumer:
        assert consumer.post("/api/v1/registry/consumers", json={
            "consumer": "seed:1:x", "subscriptions": [{"topic": "orders"}]}).status_code == 200
        assert consumer.post("/api/v1/pull", json={"topic": "orders", "consumer": "seed:1:x",
                                                    "max_messages": 5}).status_code == 200


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document this code serves at /api/schema/ (built in-process, so the
    operations are known at collection time; the test checks the live one is identical)."""
    from drf_spectacular.generators import SchemaGenerator

    return json.loads(json.dumps(SchemaGenerator().get_schema(request=None, public=True), default=str))


schema = schemathesis.openapi.from_dict(openapi_document())
# Unknown query parameters are ignored by design (HTTP custom), so none are invented.
schema.config.generation.update(
    modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE], max_examples=MAX_EXAMPLES,
    allow_extra_parameters=False,
)


def error_body_check(ctx: Any, response: Any, case: Any) -> bool | None:
    """Every 4xx/5xx carries {"error": {"code", "message", "details"}}."""
    if response.status_code < 400:
        return None
    body = json.loads(response.content)
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message", "details"}, body
    assert isinstance(body["error"]["code"], str) and isinstance(body["error"]["details"], dict), body
    return True


CHECKS = [not_a_server_error, error_body_check, status_code_conformance, content_type_conformance,
          response_schema_conformance, negative_data_rejection]
TOKEN_CYCLE = itertools.cycle(["admin", "shop-admin", "produce", "consume"])

@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_it_holds_the_contract_for_generated_requests(case: Any, live_broker: Any) -> None:
    url, tokens = live_broker
    wait = case.body.get("wait_seconds") if isinstance(case.body, dict) else None
    if isinstance(wait, int | float) and not isinstance(wait, bool) and MAX_WAIT_SECONDS < wait <= 30:
        case.body["wait_seconds"] = MAX_WAIT_SECONDS  # still valid (invalid values stay invalid)
    token = tokens[next(TOKEN_CYCLE)]
    case.call_and_validate(base_url=url, headers={"Authorization": f"Bearer {token}"}, checks=CHECKS, timeout=20)


def test_it_serves_the_same_document_live(live_broker: Any) -> None:
    url, _ = live_broker
    live = httpx.get(f"{url}/api/schema/", params={"format": "json"}, timeout=30).json()
    assert live["paths"] == openapi_document()["paths"]
