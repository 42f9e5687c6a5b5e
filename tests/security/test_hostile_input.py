"""Hostile input on every API endpoint (routes read from the URL configuration).

Whatever arrives, the answer is a clear 4xx with the API.md error body or a correct store
(that round-trips byte-exact) - never a 500, never a partial write.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from django.test import Client

from messages.models import Message, MessageTrace
from messages.operations.models import BulkJob
from mqcenter.models import AuditEntry
from registry.models import ConsumerInstance
from tests.conftest import Api, error_of
from tests.security.conftest import Sample, samples
from tests.security.routes import api_routes
from tests.support.api import expect_error, produce
from topics.models import Biz, Topic, TopicGroup

pytestmark = pytest.mark.django_db

SQL = "'; DROP TABLE mq_message; -- \" OR 1=1 /*"
HTML = "<script>alert('x')</script><img src=x onerror=alert(1)>"
JS = "javascript:alert(document.cookie)//${7*7}{{7*7}}"
HOSTILE_STRINGS = [SQL, HTML, JS, "\u0000nul", "line\r\nbreak", "\u202egnp.exe", "\U0001f4a9 \u00e9\u4e2d", "x" * 5000, ""]
WRONG_TYPES: list[Any] = [None, True, 0, -1, 2**70, 1.5, "x", [], {}, [1, {"a": None}], {"$gt": ""}]

BODY_ROUTES = [(r, m) for r in api_routes() for m in r.methods if m in ("POST", "PATCH")]
ALL_ROUTES = [(r, m) for r in api_routes() for m in r.methods]


def route_id(pair: tuple[Any, str]) -> str:
    return f"{pair[1]} {pair[0].pattern}"


def snapshot() -> tuple[Any, ...]:
    """Everything a request could write."""
    return (
        list(Message.objects.order_by("id").values_list(
            "id", "topic", "group_name", "data", "key", "headers", "status", "effect_time", "retry_remaining",
            "attempt", "lease_owner", "lease_expires_at", "update_time")),
        MessageTrace.objects.count(), AuditEntry.objects.count(), BulkJob.objects.count(),
        list(Topic.objects.order_by("id").values_list("name", "paused", "owner", "description", "updated_at")),
        TopicGroup.objects.count(), Biz.objects.count(), ConsumerInstance.objects.count(),
    )


def send(api: Api, method: str, url: str, raw: bytes, content_type: str = "application/json", **headers: str) -> Any:
    client: Client = api.client
    kwargs = {**api._headers(), **headers}
    if method == "PATCH":
        return client.patch(url, raw, content_type=content_type, **kwargs)
    return client.post(url, raw, content_type=content_type, **kwargs)


def assert_refused_cleanly(response: Any, before: tuple[Any, ...], *, allow_2xx: bool = False) -> None:
    assert response.status_code < 500, (response.status_code, response.content[:300])
    if response.status_code >= 400:
        error_of(response)
        assert snapshot() == before, "a refused request wrote something"
    else:
        assert allow_2xx, (response.status_code, response.content[:300])


def mutations(body: Any) -> list[tuple[str, Any]]:
    """(where, mutated body) for every field of the sample body, top level and first item."""
    out: list[tuple[str, Any]] = []
    if not isinstance(body, dict):
        return out
    for key, value in body.items():
        for bad in [*WRONG_TYPES, *HOSTILE_STRINGS[:4]]:
            mutated = copy.deepcopy(body)
            mutated[key] = bad
            out.append((key, mutated))
        if isinstance(value, list) and value and isinstance(value[0], dict):
            for inner in value[0]:
                for bad in [*WRONG_TYPES, *HOSTILE_STRINGS[:4]]:
                    mutated = copy.deepcopy(body)
                    mutated[key][0][inner] = bad
                    out.append((f"{key}[0].{inner}", mutated))
    return out


# --- raw bodies on every endpoint ---------------------------------------------------------

RAW_BODIES = {
    "deep_array": b"[" * 100_000,
    "deep_object": b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
    "deep_in_field": b'{"messages":[{"topic":"orders","data":' + b"[" * 100_000 + b"]" * 100_000 + b"}]}",
    "invalid_utf8": b'{"messages":[{"topic":"orders","data":"\xff\xfe\xc3"}], "consumer": "\xff"}',
    "raw_nul": b'{"messages":[{"topic":"orders","data":"a\x00b"}]}',
    "nan": b'{"messages":[{"topic":"orders","data":NaN}], "ids": [NaN], "seconds": Infinity}',
    "infinity": b'{"messages":[{"topic":"orders","data":-Infinity}], "wait_seconds": Infinity}',
    "huge_number": b'{"messages":[{"topic":"orders","data":1e999}], "ids": [1e999], "max_messages": 1e999}',
    "truncated": b'{"messages":[{"topic":"orders","data":',
    "not_json": b"topic=orders&data=1",
    "empty": b"",
    "scalar": b"42",
    "string": b'"messages"',
    "null": b"null",
    "bom": b'\xef\xbb\xbf{"messages":[]}',
    "duplicate_keys": b'{"messages":[{"topic":"orders","data":1}],"messages":"x"}',
    "lone_surrogate": b'{"messages":[{"topic":"orders","data":"\\ud800","key":"\\udfff"}],"consumer":"\\udc00",'
                      b'"topic":"\\ud800x","title":"\\udbff","data":{"\\ud800":1},"ids":[1]}',
    "crlf_keys": b'{"mess\\r\\nages":[{"to\\r\\npic":"orders","data":1}], "consumer\\r\\n": "c"}',
}


@pytest.mark.parametrize(("route", "method"), BODY_ROUTES, ids=[route_id(p) for p in BODY_ROUTES])
def test_it_refuses_hostile_raw_bodies_on_every_endpoint(route, method, world, admin_api):
    url = route.url(**world["path"])
    for name, raw in RAW_BODIES.items():
        before = snapshot()
        response = send(admin_api, method, url, raw)
        if name == "empty" and method == "PATCH" and response.status_code == 200:
            continue  # no body is an empty change set: a no-op PATCH
        if name == "empty" and getattr(getattr(route.view, "view_class", None), "body_optional", False):
            continue  # an action that takes no body (commit, cancel, run now) did its work
        assert 400 <= response.status_code < 500, (name, response.status_code, response.content[:300])
        error_of(response)
        assert snapshot() == before, name


@pytest.mark.parametrize(("route", "method"), BODY_ROUTES, ids=[route_id(p) for p in BODY_ROUTES])
def test_it_refuses_a_10_mb_body_and_a_wrong_content_type(route, method, world, admin_api):
    url = route.url(**world["path"])
    before = snapshot()
    big = json.dumps({"messages": [{"topic": "orders", "data": "x" * (10 * 1024 * 1024)}], "consumer": "c" * (10 * 1024 * 1024)}).encode()
    response = send(admin_api, method, url, big)
    assert response.status_code in (400, 413), (response.status_code, response.content[:300])
    error_of(response)
    huge = b" " * (20 * 1024 * 1024)  # beyond the body limit: refused before it is read
    expect_error(send(admin_api, method, url, huge), 413, "payload_too_large")
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        response = send(admin_api, method, url, b'{"messages": []}', content_type=content_type)
        assert 400 <= response.status_code < 500, (content_type, response.status_code)
        error_of(response)
    assert snapshot() == before


@pytest.mark.parametrize(("route", "method"), BODY_ROUTES, ids=[route_id(p) for p in BODY_ROUTES])
def test_it_survives_wrong_types_and_hostile_strings_in_every_field(route, method, world, admin_api):
    sample = samples(world).get((f"api:{route.name}", method), Sample())
    url = route.url(**world["path"])
    before = snapshot()
    for where, body in mutations(sample.body):
        response = send(admin_api, method, url, json.dumps(body).encode())
        assert response.status_code < 500, (where, body if len(str(body)) < 300 else where, response.content[:300])
        if response.status_code >= 400:
            error_of(response)
            assert snapshot() == before, (where, "a refused request wrote something")
        else:
            before = snapshot()  # an accepted request may write


@pytest.mark.parametrize(("route", "method"), ALL_ROUTES, ids=[route_id(p) for p in ALL_ROUTES])
def test_it_survives_hostile_path_and_query_values(route, method, world, admin_api):
    sample = samples(world).get((f"api:{route.name}", method), Sample())
    values = ["' OR '1'='1", "<script>x</script>", "a" * 3000, "99999999999999999999999", "-1", "%00", "..%2F..%2Fetc",
              "\U0001f4a9"]
    before = snapshot()
    for value in values:
        path = {k: value for k in world["path"]}
        url = route.url(**path)
        params = {k: value for k in (*sample.params, "topic", "cursor", "status", "limit", "id", "added_after")}
        api = admin_api
        if method == "GET":
            response = api.get(url, params)
        elif method == "DELETE":
            response = api.delete(url)
        elif method == "PATCH":
            response = api.patch(url, sample.body)
        else:
            response = api.post(url, sample.body)
        assert response.status_code < 500, (value, response.status_code, response.content[:300])
        if response.status_code >= 400:
            error_of(response)  # also a 404 for a path no route matches (the API guard)
            assert snapshot() == before, value
        else:
            before = snapshot()


def test_it_refuses_crlf_and_nul_in_the_authorization_header(world):
    for header in ("Bearer abc\r\nX-Evil: 1", "Bearer abc\x00", "Bearer " + "a" * 10000):
        response = Client().get("/api/v1/topics", HTTP_AUTHORIZATION=header)
        expect_error(response, 401, "unauthenticated")


# --- stored byte-exact --------------------------------------------------------------------


@pytest.mark.parametrize("text", HOSTILE_STRINGS, ids=range(len(HOSTILE_STRINGS)))
def test_it_stores_hostile_strings_in_data_byte_exact(admin_api, text):
    data = {"s": text, text[:100]: [text], "n": -0.0, "big": 2**62, "f": 1.0000000000000002}
    [entry] = produce(admin_api, {"topic": "orders", "data": data})
    detail = admin_api.get(f"/api/v1/messages/{entry['id']}")
    assert detail.status_code == 200
    assert detail.json()["data"] == data
    pulled = admin_api.post("/api/v1/pull", {"topic": "orders", "consumer": "c1"}).json()["messages"]
    assert pulled[0]["data"] == data and json.dumps(pulled[0]["data"]) == json.dumps(data)


@pytest.mark.parametrize("text", [SQL, HTML, JS, "\U0001f4a9 \u00e9\u4e2d", "\u202egnp.exe"])
def test_it_stores_hostile_strings_in_every_text_field_or_refuses_them(admin_api, text):
    item = {"topic": "orders", "data": 1, "key": text, "dedup_key": text, "headers": {"h": text, text[:100]: "v"}}
    [entry] = produce(admin_api, item)
    body = admin_api.get(f"/api/v1/messages/{entry['id']}").json()
    assert (body["key"], body["dedup_key"], body["headers"]) == (text, text, {"h": text, text[:100]: "v"})
    found = admin_api.get("/api/v1/messages", {"key": text}).json()["messages"]
    assert [m["id"] for m in found] == [entry["id"]]
    found = admin_api.get("/api/v1/messages", {"text": text[:20]}).json()["messages"]
    assert isinstance(found, list)
    topic = admin_api.post("/api/v1/topics", {"topic": "t1", "owner": text, "description": text})
    assert topic.status_code == 201
    assert (topic.json()["owner"], topic.json()["description"]) == (text, text)
    ack = admin_api.post("/api/v1/pull", {"topic": "orders", "consumer": "c1"})
    assert ack.status_code == 200
    result = admin_api.post("/api/v1/ack", {"consumer": "c1", "results": [{"id": entry["id"], "status": "FAIL", "log": text}]})
    assert result.status_code == 200
    assert admin_api.get(f"/api/v1/messages/{entry['id']}").json()["last_log"] == text


@pytest.mark.parametrize("field", ["key", "dedup_key", "group", "topic"])
def test_it_refuses_nul_and_line_breaks_in_single_line_fields(admin_api, field):
    for bad in ("a\x00b", "a\r\nb", "a\nb"):
        item = {"topic": "orders", "data": 1, field: bad}
        before = snapshot()
        expect_error(admin_api.post("/api/v1/messages", {"messages": [item]}), 400, "invalid_request", f"messages[0].{field}")
        assert snapshot() == before


def test_it_keeps_nul_inside_data_byte_exact(admin_api):
    [entry] = produce(admin_api, {"topic": "orders", "data": "a\u0000b\r\n"})
    assert admin_api.get(f"/api/v1/messages/{entry['id']}").json()["data"] == "a\u0000b\r\n"


def test_it_escapes_message_data_in_json_responses(admin_api):
    [entry] = produce(admin_api, {"topic": "orders", "data": HTML})
    response = admin_api.get(f"/api/v1/messages/{entry['id']}")
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["data"] == HTML


def test_it_stores_a_surrogate_pair_as_the_character_it_encodes(admin_api):
    response = admin_api.post("/api/v1/messages", raw=b'{"messages":[{"topic":"orders","data":"\\ud83d\\udca9","key":"\\ud83d\\udca9"}]}')
    assert response.status_code == 201, response.content
    body = admin_api.get(f"/api/v1/messages/{response.json()['messages'][0]['id']}").json()
    assert body["data"] == body["key"] == "\U0001f4a9"


@pytest.mark.parametrize("field", ["retry_count", "retry_interval_seconds", "timeout_seconds", "retention_days",
                                   "backlog_alarm_threshold"])
def test_it_refuses_numbers_the_store_cannot_hold(admin_api, field):
    before = snapshot()
    for value in (2**31, 2**63, -(2**63)):
        expect_error(admin_api.post("/api/v1/topics", {"topic": "t", field: value}), 400, "invalid_request", field)
    assert snapshot() == before


@pytest.mark.parametrize("headers", [{"a\r\nSet-Cookie": "x"}, {"h": "v\r\nX-Evil: 1"}, {"h": "v\x00"}, {"\x00": "v"}])
def test_it_refuses_crlf_and_nul_in_message_headers(admin_api, headers):
    before = snapshot()
    response = admin_api.post("/api/v1/messages", {"messages": [{"topic": "orders", "data": 1, "headers": headers}]})
    error = expect_error(response, 400, "invalid_request")
    assert error["details"]["field"].startswith("messages[0].headers.")
    assert snapshot() == before


# --- the console's forms ---------------------------------------------------------------------

DEEP = "[" * 50_000 + "]" * 50_000
HOSTILE_JSON = ["NaN", "Infinity", "-Infinity", '{"a": NaN}', "[1e999]", DEEP, '"\\ud800"', '{"\\udfff": 1}']


@pytest.fixture
def console(admin_api: Api) -> tuple[Client, int, int]:
    """A superuser's console session, a FAIL message of shop's topic, and the user's id."""
    from tests.support.console import make_user

    [stored] = produce(admin_api, {"topic": "orders", "group": "g", "data": {"n": 1}})
    Message.objects.filter(id=stored["id"]).update(status="FAIL")
    root = make_user("root", superuser=True)
    client = Client()
    client.force_login(root)
    return client, stored["id"], root.id


def console_cases(message_id: int, user_id: int) -> list[tuple[str, dict[str, str]]]:
    password = "a-long-pass-phrase-9"
    cases: list[tuple[str, dict[str, str]]] = []
    for text in HOSTILE_JSON:
        cases += [
            ("/messages/add/", {"topic": "orders", "group": "g", "data": text}),
            (f"/messages/{message_id}/edit/", {"data": text}),
            ("/schedules/", {"name": "s", "topic": "orders", "data": text, "cron": "* * * * *", "timezone": "UTC"}),
        ]
    return [
        *cases,
        (f"/messages/{message_id}/edit/", {"status": "EXPLODED"}),
        (f"/messages/{message_id}/edit/", {"retry_remaining": "1" * 5000}),
        (f"/messages/{message_id}/edit/", {"effect_time": "0000-01-01T00:00"}),
        ("/messages/add/", {"topic": "x" * 500, "data": "1"}),
        ("/messages/add/", {"topic": "orders", "group": "g\r\nx", "data": "1"}),
        ("/messages/add/", {"topic": "orders", "data": "1", "delay_seconds": "1e400"}),
        ("/users/", {"username": "u" * 500, "password": password}),
        ("/users/", {"username": "nul\x00name", "password": password}),
        ("/users/", {"username": "long-mail", "password": password, "email": "a" * 400 + "@example.org"}),
        ("/users/", {"username": "emperor", "password": password, "role": "emperor"}),
        ("/users/", {"username": "nowhere", "password": password, "role": "viewer", "biz": "999999"}),
        (f"/users/{user_id}/", {"op": "grant", "role": "emperor"}),
        (f"/users/{user_id}/", {"op": "explode"}),
        ("/topics/+new/", {"topic": "t1", "retry_strategy": "sometimes"}),
        ("/topics/+new/", {"topic": "t2", "retry_count": "9" * 30}),
        ("/topics/+new/", {"topic": "t3", "biz": "abc"}),
        ("/topics/orders/", {"retry_strategy": "sometimes"}),
        ("/topics/orders/", {"timeout_seconds": "nan"}),
        ("/tokens/", {"scopes": "root", "name": "x"}),
        ("/tokens/", {"scopes": "admin", "name": "x", "biz": "abc"}),
        ("/biz/", {"name": "x" * 1000}),
        ("/messages/bulk/", {"op": "explode", "ids": "abc"}),
        ("/reports/run/", {"kind": "astrology"}),
        ("/reports/run/", {"kind": "trace", "since": "99999-01-01"}),
        ("/schedules/", {"name": "s", "topic": "orders", "data": "1", "cron": "sometimes", "timezone": "Nowhere/Zone"}),
    ]


def test_it_answers_hostile_console_forms_with_an_error_and_changes_nothing(
    console: tuple[Client, int, int], admin_api: Api
) -> None:
    client, message_id, user_id = console
    from django.contrib.auth.models import User

    from messages.schedules.models import Schedule
    from mqcenter.models import ConsoleGrant
    from reports.models import ReportRun
    from topics.models import ApiToken

    def everything() -> tuple[Any, ...]:
        return (snapshot(), User.objects.count(), ConsoleGrant.objects.count(), ApiToken.objects.count(),
                Schedule.objects.count(), ReportRun.objects.count())

    for url, form in console_cases(message_id, user_id):
        before = everything()
        response = client.post(url, form)
        assert 400 <= response.status_code < 500, (url, str(form)[:80], response.status_code)
        assert everything() == before, (url, str(form)[:80], "a refused form wrote something")


@pytest.mark.parametrize("target", ["/\r\nLocation: https://evil.example", "//evil.example/", "https://evil.example/"])
def test_it_sends_an_action_with_a_hostile_next_only_to_a_page_of_this_site(
    console: tuple[Client, int, int], target: str
) -> None:
    client, message_id, _ = console

    response = client.post(f"/messages/{message_id}/redrive/", {"next": target})

    assert response.status_code == 303 and response["Location"].startswith("/") and "evil" not in response["Location"]
    assert "\n" not in response["Location"] and Message.objects.get(id=message_id).status == "NEW"
