"""Operations and documentation endpoints: /healthz, /readyz, /metrics, /api/schema/, /api/docs/."""

from __future__ import annotations

import uuid

import pytest
import yaml
from django.test import override_settings
from django.urls import reverse
from openapi_spec_validator import validate

from tests.support.api import expect_error

pytestmark = pytest.mark.django_db


def test_it_answers_healthz(anonymous_api):
    response = anonymous_api.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_it_answers_readyz_with_database_and_redis(anonymous_api):
    response = anonymous_api.get("/readyz")
    assert response.status_code == 200
    assert response.json()["checks"] == {"database": "ok", "redis": "ok"}


def test_it_serves_metrics_to_an_admin_token_only(admin_api, producer_api, anonymous_api):
    response = admin_api.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    assert b"# TYPE" in response.content
    expect_error(anonymous_api.get("/metrics"), 401, "unauthenticated")
    expect_error(producer_api.get("/metrics"), 403, "forbidden")
    from tests.conftest import Api

    expect_error(Api("mq_nope_nope").get("/metrics"), 401, "unauthenticated")


def schema_document(client):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    content = response.content.decode()
    return yaml.safe_load(content)


def test_it_serves_a_valid_openapi_document(anonymous_api):
    document = schema_document(anonymous_api.client)
    validate(document)
    assert document["openapi"].startswith("3.")


def test_it_documents_every_api_route_and_method(anonymous_api):
    from tests.security.routes import api_routes

    paths = schema_document(anonymous_api.client)["paths"]
    documented = {(path, method) for path, ops in paths.items() for method in ops if method != "parameters"}
    for route in api_routes():
        for method in route.methods:
            assert (route.schema_path, method.lower()) in documented, (route.schema_path, method)


def test_it_documents_the_error_body(anonymous_api):
    document = schema_document(anonymous_api.client)
    produce = document["paths"]["/api/v1/messages"]["post"]
    assert {"201", "400", "401", "403", "413"} <= set(produce["responses"])
    error = document["components"]["schemas"]["Error"]
    assert "error" in error["properties"]


def test_it_serves_the_docs_page(anonymous_api):
    response = anonymous_api.get(reverse("docs"))
    assert response.status_code == 200
    assert b"swagger" in response.content.lower()


def test_it_answers_unknown_endpoints_and_methods_with_the_error_body(admin_api):
    expect_error(admin_api.get("/api/v1/nothing-here"), 404, "not_found")
    response = admin_api.client.put("/api/v1/messages", "{}", content_type="application/json",
                                    HTTP_AUTHORIZATION=f"Bearer {admin_api.token}")
    expect_error(response, 405, "method_not_allowed")


def test_it_rate_limits_a_token_with_429_and_retry_after(admin_api, settings):
    # A private cache: the shared Redis cache would let concurrent test runs' tokens collide.
    rest = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"token": "3/hour"}}
    with override_settings(REST_FRAMEWORK=rest,
                           CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache",
                                               "LOCATION": "ratelimit-test"}}):
        statuses = [admin_api.get("/api/v1/topics").status_code for _ in range(4)]
        assert statuses[:3] == [200, 200, 200]
        response = admin_api.get("/api/v1/topics")
    expect_error(response, 429, "rate_limited")
    assert int(response["Retry-After"]) >= 1


def test_it_counts_a_tokens_requests_in_redis_across_processes(admin_api, settings):
    """The production path: the window's counter lives in Redis, where every broker process
    adds to it (a fresh token's key cannot collide with another run's)."""
    import redis

    from mqcenter.core.auth import token_hash

    assert settings.CACHES["default"]["BACKEND"].endswith("RedisCache")
    rest = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"token": "3/hour"}}
    with override_settings(REST_FRAMEWORK=rest):
        statuses = [admin_api.get("/api/v1/topics").status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    keys = redis.Redis.from_url(settings.CACHES["default"]["LOCATION"]).keys(
        f"mq:throttle_token_{token_hash(admin_api.token)[:24]}_*"
    )
    assert len(keys) == 1


def _shared_count(settings, token: str) -> int:
    import redis

    from mqcenter.core.auth import token_hash

    client = redis.Redis.from_url(settings.CACHES["default"]["LOCATION"])
    [key] = client.keys(f"mq:throttle_token_{token_hash(token)[:24]}_*")
    return int(client.get(key))


def test_a_process_adds_its_requests_to_the_shared_count_in_batches_under_a_large_limit(settings, monkeypatch):
    from mqcenter.core import auth

    monkeypatch.setattr(auth, "THROTTLE_SYNC_SECONDS", 3600)  # only the 1 % rule adds
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"token": "1000/hour"}}
    token = f"throttle-batches-{uuid.uuid4().hex}"
    assert [auth.token_throttle_wait(token) for _ in range(25)] == [None] * 25
    # The first request added itself; then every 11th (more than 1 % of the limit unsent).
    assert _shared_count(settings, token) == 23


def test_the_limit_holds_across_processes_to_within_one_percent(settings, monkeypatch):
    import redis

    from mqcenter.core import auth

    monkeypatch.setattr(auth, "THROTTLE_SYNC_SECONDS", 3600)
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"token": "200/hour"}}
    token = f"throttle-shared-{uuid.uuid4().hex}"
    assert auth.token_throttle_wait(token) is None
    client = redis.Redis.from_url(settings.CACHES["default"]["LOCATION"])
    [key] = client.keys(f"mq:throttle_token_{auth.token_hash(token)[:24]}_*")
    client.incrby(key, 190)  # another broker process's requests
    admitted = 0
    while auth.token_throttle_wait(token) is None:
        admitted += 1
        assert admitted < 50
    assert 191 + admitted <= 200 + 2  # at most 1 % (2) beyond the limit
    assert _shared_count(settings, token) == 191 + admitted + 1
