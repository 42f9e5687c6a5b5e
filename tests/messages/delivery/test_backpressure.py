"""Backpressure: a topic's `max_backlog` refuses (429 backlog_full, Retry-After) a produce
that would leave any group with more NEW messages, and stores nothing of the batch."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from messages.models import Message
from tests.conftest import Api
from tests.messages.delivery.test_consume import make_topic
from tests.support.api import ack, expect_error, produce, pull
from topics.models import Topic

pytestmark = pytest.mark.django_db


def items(count: int, **fields: Any) -> list[dict[str, Any]]:
    return [{"topic": "orders", "data": n, **fields} for n in range(count)]


def test_it_refuses_a_produce_over_max_backlog_with_429_and_stores_nothing(
    admin_api: Api, producer_api: Api
) -> None:
    make_topic(admin_api, max_backlog=3)
    produce(producer_api, *items(2))
    with override_settings(MQ_BACKLOG_RETRY_AFTER_SECONDS=7):
        response = producer_api.post("/api/v1/messages", {"messages": items(2)})
    error = expect_error(response, 429, "backlog_full")
    assert response["Retry-After"] == "7"
    assert error["details"] == {
        "topic": "orders",
        "group": "default",
        "max_backlog": 3,
        "backlog": 2,
        "incoming": 2,
        "retry_after": 7,
    }
    assert Message.objects.count() == 2
    produce(producer_api, *items(1))  # exactly at the limit is fine
    expect_error(producer_api.post("/api/v1/messages", {"messages": items(1)}), 429, "backlog_full")
    assert Message.objects.count() == 3


def test_it_accepts_again_once_the_group_drains(
    admin_api: Api, producer_api: Api, consumer_api: Api
) -> None:
    make_topic(admin_api, max_backlog=2)
    produce(producer_api, *items(2))
    expect_error(producer_api.post("/api/v1/messages", {"messages": items(1)}), 429, "backlog_full")
    taken = pull(consumer_api, "orders", consumer="c1", max_messages=1)
    # A running message is no longer waiting: one slot is free even before its ack.
    produce(producer_api, *items(1))
    ack(consumer_api, "c1", {"id": taken[0]["id"], "status": "SUCCESS"})
    assert Message.objects.filter(status="NEW").count() == 2


def test_a_publish_is_refused_when_any_subscribed_group_is_full(
    admin_api: Api, producer_api: Api
) -> None:
    make_topic(admin_api, max_backlog=2, groups=[{"group": "billing"}, {"group": "audit"}])
    produce(producer_api, *items(2, group="audit"))
    response = producer_api.post("/api/v1/messages", {"messages": items(1)})  # one copy per group
    assert expect_error(response, 429, "backlog_full")["details"]["group"] == "audit"
    assert Message.objects.filter(group_name="billing").count() == 0
    produce(producer_api, *items(2, group="billing"))  # billing alone has room


def test_topics_without_max_backlog_never_count(producer_api: Api) -> None:
    with CaptureQueriesContext(connection) as queries:
        produce(producer_api, *items(50))
    assert not any("COUNT(" in q["sql"].upper() for q in queries.captured_queries)


@pytest.mark.parametrize("value", [0, -1, "many", 10_000_001, 1.5])
def test_it_refuses_a_bad_max_backlog(admin_api: Api, value: Any) -> None:
    response = admin_api.post(
        "/api/v1/topics", {"topic": "orders", "biz": "shop", "max_backlog": value}
    )
    expect_error(response, 400, "invalid_request", "max_backlog")
    assert not Topic.objects.filter(name="orders").exists()


def test_it_changes_and_lifts_max_backlog_through_the_api(admin_api: Api, shop: Any) -> None:
    make_topic(admin_api)
    assert admin_api.patch("/api/v1/topics/orders", {"max_backlog": 10}).json()["max_backlog"] == 10
    assert (
        admin_api.patch("/api/v1/topics/orders", {"max_backlog": None}).json()["max_backlog"]
        is None
    )


def test_the_console_topic_form_sets_max_backlog(admin_api: Api, shop: Any) -> None:
    make_topic(admin_api)
    client = Client()
    client.force_login(
        User.objects.create_superuser("root", "root@example.org", "a-long-test-password-42")
    )
    url = reverse("console:topic", args=["orders"])
    page = client.get(url).content.decode()
    assert 'name="max_backlog"' in page
    form = {
        "biz": "shop",
        "owner": "",
        "description": "",
        "retry_strategy": "exponential",
        "retry_count": "3",
        "retry_interval_seconds": "10",
        "timeout_seconds": "60",
        "retention_days": "7",
        "max_backlog": "25",
    }
    response = client.post(url, form)
    assert response.status_code == 303, response.content[:500]
    assert Topic.objects.get(name="orders").max_backlog == 25
    form["max_backlog"] = ""
    client.post(url, form)
    assert Topic.objects.get(name="orders").max_backlog is None
