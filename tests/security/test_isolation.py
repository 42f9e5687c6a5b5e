"""Isolation between business lines: another line's objects answer exactly as missing ones,
and webhook URLs (which carry a chat tool's posting credential) reach only the topic's admins."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import override_settings

from tests.conftest import Api, make_api
from topics.models import Biz

pytestmark = pytest.mark.django_db

SECRET_HOOK = "https://hooks.slack.com/services/T000/B000/SHOPHOOKSECRET"


def shape(response: Any, name: str, stand_in: str) -> tuple[int, str]:
    """A response with the object's name replaced by a stand-in: what a caller can tell apart."""
    return response.status_code, response.content.decode().replace(name, stand_in)


@pytest.fixture
def shop_topic(admin_api: Api, shop: Biz, other_biz: Biz) -> str:
    with override_settings(MQ_ALARM_WEBHOOK_HOSTS=["hooks.slack.com"]):
        made = admin_api.post("/api/v1/topics", {
            "topic": "orders", "biz": "shop", "groups": [{"group": "billing"}],
            "alarm_webhooks": [{"url": SECRET_HOOK, "format": "slack"}]})
    assert made.status_code == 201, made.content
    return "orders"


@override_settings(MQ_AUTO_CREATE_TOPICS=False, MQ_AUTO_CREATE_GROUPS=False)
@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("get", "/api/v1/topics/{t}", None),
        ("patch", "/api/v1/topics/{t}", {"paused": True}),
        ("delete", "/api/v1/topics/{t}", None),
        ("get", "/api/v1/topics/{t}/groups", None),
        ("get", "/api/v1/topics/{t}/groups/billing", None),
        ("patch", "/api/v1/topics/{t}/groups/billing", {"paused": True}),
        ("post", "/api/v1/topics/{t}/groups", {"group": "probe"}),
        ("post", "/api/v1/messages", {"messages": [{"topic": "{t}", "data": 1}]}),
        ("post", "/api/v1/pull", {"topic": "{t}", "consumer": "c1", "wait_seconds": 0}),
        ("post", "/api/v1/registry/consumers", {"consumer": "c1", "subscriptions": [{"topic": "{t}"}]}),
        ("get", "/api/v1/registry/consumers?topic={t}", None),
    ],
)
def test_another_lines_topic_answers_as_a_topic_that_does_not_exist(shop_topic, outsider_api, method, path, body):
    answers = []
    for name in (shop_topic, "nosuchtopic"):
        url = path.replace("{t}", name)
        payload = json.loads(json.dumps(body).replace("{t}", name)) if body is not None else None
        call = getattr(outsider_api, method)
        response = call(url, payload) if method in ("post", "patch") else call(url)
        answers.append(shape(response, name, "<topic>"))
    assert answers[0] == answers[1]
    assert answers[0][0] in (200, 400, 404), answers[0]


def test_another_business_line_answers_as_one_that_does_not_exist(shop, other_biz, shop_admin_api):
    answers = [
        shape(shop_admin_api.post("/api/v1/topics", {"topic": "x1", "biz": name}), name, "<biz>")
        for name in ("other", "nosuchline")
    ]
    assert answers[0] == answers[1] and answers[0][0] == 400
    answers = [
        shape(shop_admin_api.get(f"/api/v1/biz/{biz_id}"), str(biz_id), "<id>")
        for biz_id in (other_biz.id, other_biz.id + 1000)
    ]
    assert answers[0] == answers[1] and answers[0][0] == 404


@pytest.mark.parametrize("scopes", [["produce:orders*"], ["consume:orders*"], ["produce:*", "consume:*"]])
def test_webhook_urls_are_masked_for_tokens_that_are_not_the_topics_admins(shop_topic, shop, scopes):
    response = make_api(scopes, shop).get(f"/api/v1/topics/{shop_topic}")
    assert response.status_code == 200
    assert b"SHOPHOOKSECRET" not in response.content and b"/services/" not in response.content
    assert response.json()["alarm_webhooks"] == [{"url": "https://hooks.slack.com/…", "format": "slack"}]


def test_the_topics_admins_read_webhook_urls_whole(shop_topic, shop_admin_api, admin_api):
    for api in (shop_admin_api, admin_api):
        [hook] = api.get(f"/api/v1/topics/{shop_topic}").json()["alarm_webhooks"]
        assert (hook["url"], hook["format"]) == (SECRET_HOOK, "slack")
        assert hook["secret"].startswith("whsec_")  # the signing secret, for the topic's admins only


def test_the_audit_log_keeps_webhook_urls_masked(shop_topic):
    from mqcenter.models import AuditEntry

    entries = AuditEntry.objects.filter(action="topic.create")
    assert entries.exists()
    assert all("SHOPHOOKSECRET" not in json.dumps(e.after) for e in entries)


@pytest.mark.parametrize(
    "url",
    ["https://hooks.slack.com/services/T0\r\nX-Injected: 1", "https://hooks.slack.com/a b", "ftp://hooks.slack.com/x",
     "javascript:alert(1)", "https://hooks.slack.com/\x7f"],
)
def test_a_webhook_url_with_control_characters_or_another_scheme_is_refused_at_the_door(admin_api, shop, url):
    with override_settings(MQ_ALARM_WEBHOOK_HOSTS=["hooks.slack.com"]):
        response = admin_api.post("/api/v1/topics", {"topic": "hooked", "biz": "shop",
                                                     "alarm_webhooks": [{"url": url}]})
    assert response.status_code == 400, response.content
    assert response.json()["error"]["details"]["field"] == "alarm_webhooks[0].url"


def test_webhook_hosts_may_be_allowed_per_business_line(admin_api, shop, other_biz):
    with override_settings(MQ_ALARM_WEBHOOK_HOSTS=["shop=hooks.shop.example"]):
        allowed = admin_api.post("/api/v1/topics", {"topic": "a", "biz": "shop",
                                                    "alarm_webhooks": [{"url": "https://hooks.shop.example/x"}]})
        refused = admin_api.post("/api/v1/topics", {"topic": "b", "biz": "other",
                                                    "alarm_webhooks": [{"url": "https://hooks.shop.example/x"}]})
        moved = admin_api.patch("/api/v1/topics/a", {"biz": "other"})
    assert allowed.status_code == 201, allowed.content
    assert refused.status_code == 400 and refused.json()["error"]["details"]["field"] == "alarm_webhooks[0].url"
    assert moved.status_code == 400  # its targets are not allowed to the line it would move to


@pytest.fixture
def shop_message(shop_topic, shop, admin_api) -> int:
    from tests.support.api import produce

    [entry] = produce(make_api(["produce:*"], shop), {"topic": shop_topic, "data": {"secret": 1}})
    return entry["id"]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("get", "/api/v1/messages/{id}", None),
        ("patch", "/api/v1/messages/{id}", {"data": 2}),
        ("delete", "/api/v1/messages/{id}", None),
        ("post", "/api/v1/messages/{id}/cancel", {}),
        ("get", "/api/v1/archive/messages/{id}", None),
        ("post", "/api/v1/ack", {"consumer": "c1", "results": [{"id": "{id}", "status": "SUCCESS"}]}),
        ("post", "/api/v1/extend", {"consumer": "c1", "ids": ["{id}"], "seconds": 30}),
        ("post", "/api/v1/release", {"consumer": "c1", "ids": ["{id}"]}),
    ],
)
def test_another_lines_message_answers_as_a_message_that_does_not_exist(shop_message, outsider_api, method, path,
                                                                        body):
    from messages.models import Message

    Message.objects.filter(id=shop_message).update(status="RUNNING", lease_owner="c1")
    answers = []
    for message_id in (shop_message, shop_message + 10_000):
        url = path.replace("{id}", str(message_id))
        payload = json.loads(json.dumps(body).replace('"{id}"', str(message_id))) if body is not None else None
        call = getattr(outsider_api, method)
        response = call(url, payload) if method in ("post", "patch") else call(url)
        answers.append(shape(response, str(message_id), "<id>"))
    assert answers[0] == answers[1]
    assert Message.objects.get(id=shop_message).status == "RUNNING"


def test_another_lines_topic_has_the_stats_of_a_topic_that_does_not_exist(shop_topic, outsider_api):
    answers = [shape(outsider_api.get("/api/v1/stats", {"topic": name}), name, "<topic>")
               for name in (shop_topic, "nosuchtopic")]
    assert answers[0] == answers[1] and answers[0][0] == 200


def test_the_topic_form_refuses_a_webhook_url_with_a_line_break(shop_topic):
    from tests.support.console import client_for, make_user

    admin = client_for(make_user("form-admin", superuser=True))
    with override_settings(MQ_ALARM_WEBHOOK_HOSTS=["hooks.slack.com"]):
        response = admin.post(f"/topics/{shop_topic}/", {
            "webhook_url": "https://hooks.slack.com/services/x\r\nX-Injected: 1", "webhook_format": "slack",
            "retry_count": "3"})
    assert response.status_code == 400 and "printable ASCII" in response.content.decode()
