"""Alarm webhooks in the console and the topic API: saved from the topic form, refused for a
host the operator did not allow (the typed input kept), the "Send test alarm" button posting
to a real local server, only for the topic's admins, and URLs shown whole only to them."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client, override_settings
from django.utils import timezone

from messages.alarms.models import Alarm
from messages.alarms.webhooks import alarm_webhooks_deliver
from mqcenter.models import AuditEntry
from tests.support.api import expect_error
from tests.support.webhook_server import WebhookServer
from topics.models import Topic

SECRET_PATH = "/robot/send?access_token=s3cr3t-t0ken"


def form(url: str, fmt: str) -> dict[str, Any]:
    """The topic form as the page posts it: one saved row and the empty row for a new one."""
    return {
        "biz": "shop",
        "retry_count": "2",
        "retry_strategy": "exponential",
        "webhook_url": [url, ""],
        "webhook_format": [fmt, "generic"],
    }


def test_it_saves_webhooks_from_the_topic_form_and_removes_a_cleared_one(
    clients: dict[str, Client], orders: Topic
) -> None:
    with override_settings(MQ_ALARM_WEBHOOK_HOSTS=["oapi.dingtalk.com"]):
        response = clients["admin"].post(
            "/topics/orders/", form(f"https://oapi.dingtalk.com{SECRET_PATH}", "dingtalk")
        )
        assert response.status_code == 303
        orders.refresh_from_db()
        assert unsigned(orders.alarm_webhooks) == [
            {"url": f"https://oapi.dingtalk.com{SECRET_PATH}", "format": "dingtalk"}
        ]
        page = clients["admin"].get("/topics/orders/").content.decode()
        assert "s3cr3t-t0ken" in page and "Send test alarm" in page
        assert clients["admin"].post("/topics/orders/", form("", "generic")).status_code == 303
    orders.refresh_from_db()
    assert orders.alarm_webhooks == []


def test_it_refuses_a_host_not_allowed_with_a_form_error_and_keeps_the_input(
    clients: dict[str, Client],
    orders: Topic,
) -> None:
    with override_settings(MQ_ALARM_WEBHOOK_HOSTS=["hooks.slack.com"]):
        response = clients["admin"].post(
            "/topics/orders/", form("https://evil.example.net/collect", "slack")
        )
    assert response.status_code == 400
    body = response.content.decode()
    assert (
        "alarm_webhooks[0].url" in body
        and "&#x27;evil.example.net&#x27; is not in MQ_ALARM_WEBHOOK_HOSTS" in body
    )
    assert 'value="https://evil.example.net/collect"' in body  # what was typed is still there
    assert "Save</button>" in body
    orders.refresh_from_db()
    assert orders.alarm_webhooks == []
    with override_settings(MQ_ALARM_WEBHOOK_HOSTS=[]):
        response = clients["admin"].post(
            "/topics/orders/", form("https://hooks.slack.com/services/x", "slack")
        )
    assert response.status_code == 400 and "listed no hosts" in response.content.decode()


def test_it_shows_other_roles_only_the_webhook_host(
    clients: dict[str, Client], orders: Topic
) -> None:
    Topic.objects.filter(pk=orders.pk).update(
        alarm_webhooks=[{"url": f"https://oapi.dingtalk.com{SECRET_PATH}", "format": "dingtalk"}]
    )
    now = timezone.now()
    Alarm.objects.create(
        topic="orders",
        kind="backlog",
        period_start=now,
        value=9,
        threshold=5,
        message="9 wait",
        created_at=now,
        webhooks={
            f"https://oapi.dingtalk.com{SECRET_PATH}": {
                "format": "dingtalk",
                "state": "failed",
                "attempts": 6,
                "error": "HTTP 502 Bad Gateway",
                "at": now.isoformat(),
            }
        },
    )
    for role in ("viewer", "operator"):
        page = clients[role].get("/topics/orders/").content.decode()
        assert (
            "https://oapi.dingtalk.com/…" in page
            and "s3cr3t" not in page
            and "Send test alarm" not in page
        )
        history = clients[role].get("/alarms/").content.decode()
        assert "https://oapi.dingtalk.com/…" in history and "s3cr3t" not in history
        assert "6 attempts" in history and "HTTP 502 Bad Gateway" in history


@pytest.mark.parametrize("fmt", ["generic", "wecom"])
def test_it_sends_a_test_alarm_from_the_button(
    clients: dict[str, Client], orders: Topic, fmt: str
) -> None:
    with WebhookServer() as server, override_settings(MQ_ALARM_WEBHOOK_HOSTS=[server.host]):
        Topic.objects.filter(pk=orders.pk).update(
            alarm_webhooks=[{"url": server.url(), "format": fmt}]
        )
        page = clients["admin"].get("/topics/orders/").content.decode()
        assert f'form="alarm-test" name="url" value="{server.url()}"' in page
        response = clients["admin"].post("/topics/orders/alarm-test/", {"url": server.url()})
        assert response.status_code == 303 and response["Location"] == "/topics/orders/"
        queued = clients["admin"].get("/topics/orders/").content.decode()
        assert f"Test alarm to http://{server.host}/… queued" in queued and server.received == []
        alarm_webhooks_deliver()  # the outbound worker's job
        page = clients["admin"].get("/topics/orders/").content.decode()
        assert 'class="badge s-SUCCESS">sent</span>' in page and f"http://{server.host}/…" in page
        [body] = server.bodies("/hook")
    if fmt == "generic":
        assert (
            body["test"] is True
            and body["alarm"]["topic"] == "orders"
            and body["alarm"]["kind"] == "test"
        )
        assert "user:ada" in body["alarm"]["message"]
    else:
        assert body["msgtype"] == "text" and body["text"]["content"].startswith(
            "[MQ Center] Test alarm on topic orders"
        )
    entry = AuditEntry.objects.get(action="topic.alarm_test")
    assert entry.actor == "user:ada" and entry.after["webhook"] == f"http://{server.host}/…"


def test_it_reports_a_test_alarm_that_timed_out(clients: dict[str, Client], orders: Topic) -> None:
    with (
        WebhookServer(slow=1, delay=30) as server,
        override_settings(
            MQ_ALARM_WEBHOOK_HOSTS=[server.host],
            MQ_ALARM_WEBHOOK_TIMEOUT_SECONDS=0.5,
        ),
    ):
        Topic.objects.filter(pk=orders.pk).update(
            alarm_webhooks=[{"url": server.url(), "format": "slack"}]
        )
        assert (
            clients["admin"].post("/topics/orders/alarm-test/", {"url": server.url()}).status_code
            == 303
        )
        alarm_webhooks_deliver()
    page = clients["admin"].get("/topics/orders/").content.decode()
    assert 'class="badge s-FAIL">failed</span>' in page and "no complete answer within 0.5 s" in page


@pytest.mark.parametrize("role", ["anonymous", "viewer", "outsider", "operator"])
def test_it_lets_no_one_but_the_topics_admins_send_a_test_alarm(
    clients: dict[str, Client], orders: Topic, role: str
) -> None:
    with WebhookServer() as server, override_settings(MQ_ALARM_WEBHOOK_HOSTS=[server.host]):
        Topic.objects.filter(pk=orders.pk).update(
            alarm_webhooks=[{"url": server.url(), "format": "generic"}]
        )
        response = clients[role].post("/topics/orders/alarm-test/", {"url": server.url()})
        assert response.status_code in ((302,) if role == "anonymous" else (403, 404))
        assert server.received == []


def test_it_refuses_a_test_alarm_to_a_url_that_is_not_a_target(
    clients: dict[str, Client], orders: Topic
) -> None:
    with WebhookServer() as server, override_settings(MQ_ALARM_WEBHOOK_HOSTS=[server.host]):
        response = clients["admin"].post("/topics/orders/alarm-test/", {"url": server.url()})
        assert response.status_code == 400 and "no such webhook target" in response.content.decode()
        assert server.received == []


def test_it_sets_webhooks_through_the_topic_api(admin_api: Any, shop: Any) -> None:
    hooks = [
        {"url": "https://hooks.slack.com/services/T0/B0/x", "format": "slack"},
        {"url": "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=k", "format": "wecom"},
    ]
    with override_settings(MQ_ALARM_WEBHOOK_HOSTS=["hooks.slack.com", "qyapi.weixin.qq.com"]):
        created = admin_api.post("/api/v1/topics", {"topic": "orders", "alarm_webhooks": hooks})
        assert created.status_code == 201, created.content
        assert unsigned(created.json()["alarm_webhooks"]) == hooks
        secret = created.json()["alarm_webhooks"][0]["secret"]
        assert secret.startswith("whsec_") and len(secret) > 40  # each target its own signing secret
        assert created.json()["alarm_webhooks"][1]["secret"] != secret
        patched = admin_api.patch(
            "/api/v1/topics/orders", {"alarm_webhooks": [{"url": hooks[0]["url"]}]}
        )
        assert patched.status_code == 200 and unsigned(patched.json()["alarm_webhooks"]) == [
            {**hooks[0], "format": "generic"}
        ]
        assert patched.json()["alarm_webhooks"][0]["secret"] == secret  # a kept target keeps its secret
        expect_error(
            admin_api.patch(
                "/api/v1/topics/orders", {"alarm_webhooks": [{"url": "http://10.0.0.8/x"}]}
            ),
            400,
            "invalid_request",
            "alarm_webhooks[0].url",
        )
        expect_error(
            admin_api.patch(
                "/api/v1/topics/orders",
                {"alarm_webhooks": [{"url": hooks[0]["url"], "format": "irc"}]},
            ),
            400,
            "invalid_request",
            "alarm_webhooks[0].format",
        )
        expect_error(
            admin_api.patch("/api/v1/topics/orders", {"alarm_webhooks": [{"url": 5}]}),
            400,
            "invalid_request",
            "alarm_webhooks[0].url",
        )
    assert unsigned(Topic.objects.get(name="orders").alarm_webhooks) == [{**hooks[0], "format": "generic"}]


def unsigned(hooks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The targets without their signing secrets (random)."""
    return [{k: v for k, v in h.items() if k != "secret"} for h in hooks]
