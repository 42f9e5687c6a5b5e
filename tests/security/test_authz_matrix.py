"""Authorization matrix, generated from the URL configuration.

Every route under /api/v1/ x every method its view implements x {no token, each token whose
scopes do not cover it, another business line's token, a global admin}. Routes are read from
`get_resolver()`, so a route added later is covered without editing this file: without a
sample below it is called with an empty body and must still answer 401 without a token and
403 to tokens without the admin scope.
"""

from __future__ import annotations

from typing import Any

import pytest

from messages.models import Message
from tests.conftest import Api, error_of, make_api
from tests.security.conftest import MARKERS, Sample, samples
from tests.security.routes import api_routes
from tests.support.api import expect_error

pytestmark = pytest.mark.django_db

def call(api: Api, method: str, url: str, sample: Sample) -> Any:
    if method == "GET":
        return api.get(url, sample.params)
    if method == "DELETE":
        return api.delete(url)
    if method == "PATCH":
        return api.patch(url, sample.body)
    return api.post(url, sample.body)


def satisfies(scopes: list[str], needs: str) -> bool:
    if needs == "any":
        return True
    if needs == "topic":
        return any(s.startswith(("produce:orders", "consume:orders")) for s in scopes)
    return any(s == needs or s.startswith(f"{needs}:orders") for s in scopes)


NON_ADMIN_SCOPES = (["produce:orders*"], ["consume:orders*"], ["produce:zzz*", "consume:zzz*"])

ROUTES = [(route, method) for route in api_routes() for method in route.methods]


def test_it_finds_the_api_routes_and_every_sample_names_a_real_one():
    found = {(f"api:{r.name}", m) for r, m in ROUTES}
    assert len(found) >= 25
    stale = set(samples({"running": 1, "dead": 2})) - found
    assert not stale, f"samples for routes that no longer exist: {stale}"


@pytest.mark.parametrize(("route", "method"), ROUTES, ids=[f"{m} {r.pattern}" for r, m in ROUTES])
def test_it_guards_every_route(route, method, world, admin_api, outsider_api, shop):
    sample = samples(world).get((f"api:{route.name}", method), Sample())
    url = route.url(**world["path"])

    # 1. No token, and a token nobody issued: 401 with the error body.
    for api in (Api(None), Api("mq_0000000000_notatoken")):
        expect_error(call(api, method, url, sample), 401, "unauthenticated")

    # 2. Tokens of shop whose scopes do not cover the route: 403 (or, for lists cut to the
    #    caller's scope, nothing of the topic).
    for scopes in NON_ADMIN_SCOPES:
        if satisfies(scopes, sample.needs):
            continue
        response = call(make_api(scopes, shop), method, url, sample)
        if sample.filtered and sample.needs == "any":
            assert response.status_code == 200, (scopes, response.content)
            assert not any(m.encode() in response.content for m in MARKERS), (scopes, response.content)
        else:
            expect_error(response, 403, "forbidden")

    # 3. Another business line's token with every scope: never shop data; 400/403/404, or a
    #    2xx only for lists cut down to its own business line (and then changing nothing).
    before = list(Message.objects.order_by("id").values_list("id", "status", "lease_owner", "lease_expires_at", "data"))
    response = call(outsider_api, method, url, sample)
    assert not any(m.encode() in response.content for m in MARKERS), response.content
    if 200 <= response.status_code < 300:
        assert sample.filtered or sample.needs == "any", (method, url, response.status_code, response.content)
    else:
        # 400: a body naming shop's business line, answered as a line that does not exist.
        assert response.status_code in (400, 403, 404), (method, url, response.status_code, response.content)
        error_of(response)
    after = list(Message.objects.order_by("id").values_list("id", "status", "lease_owner", "lease_expires_at", "data"))
    assert after == before, "another business line's token changed shop's messages"

    # 4. A global admin token passes the permission checks.
    response = call(admin_api, method, url, sample)
    assert response.status_code not in (401, 403) and response.status_code < 500, (method, url, response.content)


def test_it_serves_metrics_only_to_a_global_admin(admin_api, shop_admin_api, outsider_api, shop):
    expect_error(Api(None).get("/metrics"), 401, "unauthenticated")
    expect_error(Api("mq_0000000000_notatoken").get("/metrics"), 401, "unauthenticated")
    for scopes in NON_ADMIN_SCOPES:
        expect_error(make_api(scopes, shop).get("/metrics"), 403, "forbidden")
    # Metrics are labelled with every business line's topic names.
    expect_error(outsider_api.get("/metrics"), 403, "forbidden")
    expect_error(shop_admin_api.get("/metrics"), 403, "forbidden")
    assert admin_api.get("/metrics").status_code == 200


def test_it_stops_accepting_a_revoked_token(admin_api, shop):
    from mqcenter.core.auth import token_cache
    from topics.models import ApiToken
    from topics.services import token_create, token_revoke

    token, row = token_create(actor="t", scopes=["admin"], biz=shop)
    assert Api(token).get("/api/v1/topics").status_code == 200
    token_revoke(actor="t", token=ApiToken.objects.get(id=row.id))
    token_cache.clear()
    expect_error(Api(token).get("/api/v1/topics"), 401, "unauthenticated")


@pytest.mark.parametrize("header", ["Basic dXNlcjpwYXNz", "Bearer", "Bearer a b", "Token abc", "Bearer mq_\u00e9_x"])
def test_it_refuses_malformed_authorization_headers(db, header):
    from django.test import Client

    response = Client().get("/api/v1/topics", HTTP_AUTHORIZATION=header)
    expect_error(response, 401, "unauthenticated")


def test_it_lists_no_consumer_of_another_business_line(world, outsider_api, shop_admin_api):
    everything = outsider_api.get("/api/v1/registry/consumers")
    assert everything.status_code == 200 and everything.json() == []
    mine = shop_admin_api.get("/api/v1/registry/consumers").json()
    assert [c["consumer"] for c in mine] == ["shophost:1:c1"]


@pytest.mark.parametrize(("pattern", "method"), [("api/v1/leaky-open", "GET"), ("api/v1/leaky-any-token", "POST")])
def test_it_would_fail_for_a_route_added_without_a_permission_check(
    pattern, method, settings, world, admin_api, outsider_api, shop
):
    settings.ROOT_URLCONF = "tests.security.leaky_urls"
    routes = {r.pattern: r for r in api_routes()}
    assert pattern in routes and method in routes[pattern].methods  # found without being listed anywhere
    with pytest.raises(AssertionError):
        test_it_guards_every_route(routes[pattern], method, world, admin_api, outsider_api, shop)
