"""The fast path for produce, pull and ack (mqcenter/fastpath.py) against Django's views for
the same endpoints: the same answers, the same refusals, and what it is for (waiting pulls
hold no thread)."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest
from django.test import override_settings

from mqcenter.core import metrics
from tests.api.helpers import expect_error, produce
from tests.conftest import Api, make_api
from tests.support.asgi import AsgiClient

pytestmark = pytest.mark.django_db(transaction=True)


def fast_count(endpoint: str) -> float:
    return sum(
        sample.value
        for metric in metrics.fast_path.collect()
        for sample in metric.samples
        if sample.name.endswith("_total") and sample.labels["endpoint"] == endpoint
    )


def served_both_ways(api: Api, path: str, raw: bytes, **headers: str) -> tuple[Any, Any]:
    """The same request through Django's views and through the ASGI application."""
    meta = {**api._headers(), **headers}
    content_type = meta.pop("CONTENT_TYPE", "application/json")
    django = api.client.post(path, raw, content_type=content_type, **meta)
    asgi = AsgiClient().post(path, raw, content_type=content_type, **meta)
    return django, asgi


PRODUCE = {"messages": [{"topic": "orders", "data": {"n": 1}, "key": "k1", "dedup_key": "d1"}]}
PULL = {"topic": "orders", "consumer": "c1", "max_messages": 5}
ACK = {"consumer": "c1", "results": [{"id": 1, "status": "SUCCESS"}]}
CASES = [
    ("/api/v1/messages", json.dumps(PRODUCE).encode()),  # the second time: answered from dedup
    ("/api/v1/messages", json.dumps({"messages": [{"topic": "payments", "data": 1}]}).encode()),
    ("/api/v1/messages", json.dumps({"messages": []}).encode()),
    ("/api/v1/messages", json.dumps({"messages": [{"topic": "orders", "data": 1, "delay_seconds": -1}]}).encode()),
    ("/api/v1/messages", json.dumps({"messages": [{"topic": "orders", "data": 1}] * 1001}).encode()),
    ("/api/v1/messages", b'{"messages": [{"topic": "orders", "data": "\\ud800"}]}'),
    ("/api/v1/pull", json.dumps(PULL).encode()),
    ("/api/v1/pull", json.dumps({**PULL, "topic": "payments"}).encode()),  # outside the consume scope
    ("/api/v1/pull", json.dumps({**PULL, "max_messages": 0}).encode()),
    ("/api/v1/pull", json.dumps({**PULL, "wait_seconds": "1"}).encode()),
    ("/api/v1/pull", b"[1, 2]"),
    ("/api/v1/pull", b"{"),
    ("/api/v1/pull", b"\xff\xfe"),
    ("/api/v1/pull", b"NaN"),
    ("/api/v1/pull", b'{"topic": "orders", "consumer": "\\ud800"}'),
    ("/api/v1/pull", b"[" * 100_000),
    ("/api/v1/pull", json.dumps({**PULL, "results": ACK["results"]}).encode()),  # a pull carrying acks
    ("/api/v1/pull", json.dumps({**PULL, "results": [{"id": 1, "status": "DONE"}]}).encode()),
    ("/api/v1/pull", json.dumps({**PULL, "topic": "payments", "results": ACK["results"]}).encode()),
    ("/api/v1/ack", json.dumps(ACK).encode()),
    ("/api/v1/ack", json.dumps({**ACK, "results": []}).encode()),
    ("/api/v1/ack", json.dumps({**ACK, "results": [{"id": 2**64, "status": "SUCCESS"}]}).encode()),
    ("/api/v1/ack", json.dumps({**ACK, "results": [{"id": 1, "status": "DONE"}]}).encode()),
    ("/api/v1/ack", json.dumps({"results": ACK["results"]}).encode()),
]


@pytest.mark.parametrize(("path", "raw"), CASES, ids=[f"{p}:{r[:40]!r}" for p, r in CASES])
def test_it_answers_as_the_django_view_does(shop, path, raw):
    api = make_api(["produce:orders*", "consume:orders*"], shop)
    before = fast_count(path.rsplit("/", 1)[-1])
    django, asgi = served_both_ways(api, path, raw)
    assert fast_count(path.rsplit("/", 1)[-1]) == before + 1  # the fast path answered
    expected = json.loads(django.content)
    if django.status_code == 201:  # the same dedup key again: the stored message, as a duplicate
        expected = {"messages": [{**m, "duplicate": True} for m in expected["messages"]]}
    assert (asgi.status_code, asgi.json()) == (django.status_code, expected)
    assert asgi.status_code < 500
    for header in ("Content-Type", "X-Content-Type-Options", "X-Frame-Options", "Retry-After"):
        assert asgi.get(header) == django.get(header), header


def test_it_answers_unknown_tokens_and_other_business_lines_as_django_does(consumer_api, outsider_api, producer_api):
    [entry] = produce(producer_api, {"topic": "orders", "data": 1})
    pulled = AsgiClient().post("/api/v1/pull", json.dumps(PULL), **consumer_api._headers())
    assert [m["id"] for m in pulled.json()["messages"]] == [entry["id"]]
    for api, path, body in [
        (Api("mq_0000000000_nope"), "/api/v1/pull", PULL),
        (outsider_api, "/api/v1/pull", PULL),  # another business line: its topic "orders" is not shop's
        (outsider_api, "/api/v1/ack", {"consumer": "c1", "results": [{"id": entry["id"], "status": "SUCCESS"}]}),
    ]:
        django, asgi = served_both_ways(api, path, json.dumps(body).encode())
        assert (asgi.status_code, asgi.json()) == (django.status_code, django.json())
    # Neither refusal touched the message: c1 still holds it.
    acked = AsgiClient().post("/api/v1/ack", json.dumps(ACK | {"results": [{"id": entry["id"], "status": "SUCCESS"}]}),
                              **consumer_api._headers())
    assert acked.json() == {"results": [{"id": entry["id"], "outcome": "success"}]}


@pytest.mark.parametrize(
    ("headers", "status", "code"),
    [
        ({"CONTENT_TYPE": "text/plain"}, 415, "unsupported_media_type"),
        ({"HTTP_ACCEPT": "text/html"}, 406, "not_acceptable"),
        ({"HTTP_AUTHORIZATION": "Token abc"}, 401, "unauthenticated"),
        ({"HTTP_AUTHORIZATION": ""}, 401, "unauthenticated"),
    ],
)
def test_it_leaves_unusual_requests_to_django(consumer_api, headers, status, code):
    before = fast_count("pull")
    django, asgi = served_both_ways(consumer_api, "/api/v1/pull", json.dumps(PULL).encode(), **headers)
    assert fast_count("pull") == before
    expect_error(asgi, status, code)
    assert (asgi.status_code, asgi.json()) == (django.status_code, django.json())


def test_it_refuses_an_oversized_body_from_its_length_alone(consumer_api):
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000):
        response = AsgiClient().post("/api/v1/ack", b"{" + b" " * 2000 + b"}", **consumer_api._headers())
    expect_error(response, 413, "payload_too_large")


def test_it_rate_limits_pull_and_ack_with_429_and_retry_after(consumer_api, settings):
    rest = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"token": "2/hour"}}
    with override_settings(REST_FRAMEWORK=rest,
                           CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache",
                                               "LOCATION": "fastpath-ratelimit-test"}}):
        client = AsgiClient()
        answers = [client.post("/api/v1/pull", json.dumps(PULL), **consumer_api._headers()) for _ in range(2)]
        assert [a.status_code for a in answers] == [200, 200]
        for path, body in [("/api/v1/pull", PULL), ("/api/v1/ack", ACK)]:
            response = client.post(path, json.dumps(body), **consumer_api._headers())
            error = expect_error(response, 429, "rate_limited")
            assert int(response["Retry-After"]) >= 1 and error["details"]["retry_after"] >= 1


def test_waiting_pulls_hold_no_thread_and_each_gets_its_own_message(shop, producer_api):
    """A hundred long-polls wait on the event loop; a produce of a hundred messages reaches
    them (handed off by the produce, messages/services/handoff.py), one message each, none
    twice."""
    consumer = make_api(["consume:orders*"], shop)
    waiters = 100
    loop, client = AsgiClient._start()
    threads_before = threading.active_count()

    async def pull(n: int) -> Any:
        body = {"topic": "orders", "consumer": f"c{n}", "max_messages": 1, "wait_seconds": 20}
        return await client.post("/api/v1/pull", json=body, headers={"authorization": f"Bearer {consumer.token}"})

    futures = [asyncio.run_coroutine_threadsafe(pull(n), loop) for n in range(waiters)]
    from registry.wakeups import wakeup_hub

    for _ in range(200):
        if wakeup_hub().waiting_count() >= waiters:
            break
        threading.Event().wait(0.05)
    assert wakeup_hub().waiting_count() >= waiters
    # The fast path's pool is 32 threads at most; a thread per waiting pull would add 100.
    assert threading.active_count() - threads_before < 40
    entries = produce(producer_api, *({"topic": "orders", "data": i} for i in range(waiters)))
    answers = [future.result(timeout=30) for future in futures]
    assert {a.status_code for a in answers} == {200}
    got = [m["id"] for a in answers for m in a.json()["messages"]]
    assert sorted(got) == sorted(e["id"] for e in entries)
