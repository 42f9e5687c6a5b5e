"""Shared fixtures: tokens for a small cast (admin, producer, consumer, outsider) and a
JSON API client. Tests run against the real MariaDB and Redis (mqcenter.test_settings)."""

from __future__ import annotations

import os
from typing import Any

import pytest
from django.test import Client

from messages.stats.live import live_store
from mqcenter.core.auth import token_cache
from topics.cache import topic_cache
from topics.models import Biz
from topics.services import token_create

# Fixtures shared across the tree: the console's cast, and the maintenance helpers' Celery
# processes.
pytest_plugins = ["tests.support.console", "tests.support.maintenance"]


class Api:
    """A test client speaking API.md: JSON bodies and a bearer token. Its requests go to
    Django's URL configuration; with `client_class` set to `tests.support.asgi.AsgiClient`
    they go through the broker's whole ASGI application, fast path included."""

    client_class: Any = Client

    def __init__(self, token: str | None) -> None:
        self.client = self.client_class()
        self.token = token

    def _headers(self) -> dict[str, str]:
        return {"HTTP_AUTHORIZATION": f"Bearer {self.token}"} if self.token else {}

    def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        return self.client.get(path, params or {}, **self._headers())

    def post(self, path: str, body: Any = None, raw: bytes | None = None) -> Any:
        import json

        data = raw if raw is not None else json.dumps(body)
        return self.client.post(path, data, content_type="application/json", **self._headers())

    def patch(self, path: str, body: Any) -> Any:
        import json

        return self.client.patch(path, json.dumps(body), content_type="application/json", **self._headers())

    def delete(self, path: str) -> Any:
        return self.client.delete(path, **self._headers())


@pytest.fixture
def through_asgi(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every `Api` of the test sends its requests through the broker's ASGI application."""
    from tests.support.asgi import AsgiClient

    monkeypatch.setattr(Api, "client_class", AsgiClient)


@pytest.fixture(autouse=True)
def _fresh_token_cache() -> None:
    # Rolled-back test data never fires the signals that keep these per-process caches true.
    token_cache.clear()
    topic_cache.forget()
    live_store().clear()  # counters another test left in this Redis database


@pytest.fixture
def shop(db: Any) -> Biz:
    return Biz.objects.create(name="shop")


@pytest.fixture
def other_biz(db: Any) -> Biz:
    return Biz.objects.create(name="other")


def make_api(scopes: list[str], biz: Biz | None = None) -> Api:
    token, _ = token_create(actor="test", scopes=scopes, biz=biz, name="-".join(scopes))
    return Api(token)


@pytest.fixture
def admin_api(db: Any) -> Api:
    """A global admin token."""
    return make_api(["admin"])


@pytest.fixture
def shop_admin_api(shop: Biz) -> Api:
    return make_api(["admin"], shop)


@pytest.fixture
def producer_api(shop: Biz) -> Api:
    return make_api(["produce:orders*"], shop)


@pytest.fixture
def consumer_api(shop: Biz) -> Api:
    return make_api(["consume:orders*"], shop)


@pytest.fixture
def outsider_api(other_biz: Biz) -> Api:
    """Another business line's token with broad scopes: must not reach shop's topics."""
    return make_api(["produce:*", "consume:*", "admin"], other_biz)


@pytest.fixture
def anonymous_api(db: Any) -> Api:
    return Api(None)


def error_of(response: Any) -> dict[str, Any]:
    """The API.md error body of a response (asserting it has that shape)."""
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message", "details"}, body
    return body["error"]


# The slow lanes by directory, whatever each module marks: `./scripts/test.sh --fast` leaves
# out what starts broker, worker or browser processes, or Spark.
_LANES = {"e2e": "e2e", "faults": "e2e", "bench": "e2e", "ha": "e2e", "browser": "browser", "spark": "spark"}
# The HA lane of scripts/test.sh starts a Galera cluster and sets this; other runs skip the
# tests that need that cluster.
_GALERA_LANE = os.environ.get("MQ_GALERA_LANE") == "1"


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    for item in items:
        if not _GALERA_LANE and item.get_closest_marker("galera"):
            item.add_marker(pytest.mark.skip(reason="needs the HA lane's Galera cluster (MQ_GALERA_LANE=1)"))
        if "e2e" in item.path.name:
            item.add_marker(pytest.mark.e2e)
        parts = item.path.parts
        for folder, marker in _LANES.items():
            if "tests" in parts and folder in parts[parts.index("tests") + 1:-1]:
                item.add_marker(getattr(pytest.mark, marker))
                if marker in ("browser", "spark"):
                    # One xdist worker each: their Celery workers share a queue, and the Spark
                    # tests share one generated world per package.
                    item.add_marker(pytest.mark.xdist_group(marker))
