"""A topic's defaults and overflow on the real database: a batch larger than max_backlog
answers 400; `drop_oldest` and `dead_letter_oldest` make room by finishing the oldest
deliverable messages in the produce's transaction; a topic's default TTL; and a topic without
max_backlog takes no lock and counts nothing."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from messages.models import Message, MessageTrace, Status
from tests.conftest import Api
from tests.messages.delivery.test_consume import make_topic
from tests.support.api import expect_error, parse_time, produce, pull
from topics.models import Topic

pytestmark = pytest.mark.django_db


def items(count: int, start: int = 0, **fields: Any) -> list[dict[str, Any]]:
    return [{"topic": "orders", "data": n, **fields} for n in range(start, start + count)]


def waiting() -> list[str]:
    return list(Message.objects.filter(status=Status.NEW).order_by("id").values_list("data", flat=True))


@pytest.mark.parametrize("overflow", ["reject", "drop_oldest", "dead_letter_oldest"])
def test_a_batch_larger_than_max_backlog_answers_400_whatever_the_policy(
    admin_api: Api, producer_api: Api, overflow: str
) -> None:
    make_topic(admin_api, max_backlog=3, overflow=overflow, groups=[{"group": "billing"}])
    for batch in (items(4), items(4, group="billing")):
        error = expect_error(producer_api.post("/api/v1/messages", {"messages": batch}), 400, "invalid_request",
                             "messages")
        assert error["details"]["max_backlog"] == 3 and error["details"]["incoming"] == 4
    assert not Message.objects.exists()
    produce(producer_api, *items(3))  # exactly the cap fits


@pytest.mark.parametrize(("overflow", "status", "event"), [
    ("drop_oldest", Status.EXPIRED, "dead"), ("dead_letter_oldest", Status.EXPIRED, "dead")])
def test_an_overflow_policy_finishes_the_oldest_deliverable_messages_to_make_room(
    admin_api: Api, producer_api: Api, consumer_api: Api, overflow: str, status: str, event: str
) -> None:
    make_topic(admin_api, max_backlog=3, overflow=overflow)
    produce(producer_api, *items(3))
    [running] = pull(consumer_api, "orders", max_messages=1)  # running: not waiting, never evicted
    assert running["data"] == 0
    produce(producer_api, *items(1, start=3))
    produce(producer_api, *items(2, start=4))
    assert waiting() == ["3", "4", "5"]
    evicted = Message.objects.filter(status=status).order_by("id")
    assert [m.data for m in evicted] == ["1", "2"] and {m.last_log for m in evicted} == {"overflow"}
    traces = MessageTrace.objects.filter(message_id__in=[m.id for m in evicted])
    assert {(t.event, t.status_after, t.actor) for t in traces} == {(event, status, "broker")}
    assert "overflow" in traces[0].log and overflow in traces[0].log
    assert Message.objects.get(data="0").status == Status.RUNNING


def test_an_overflow_policy_refuses_when_not_enough_is_deliverable(admin_api: Api, producer_api: Api) -> None:
    make_topic(admin_api, max_backlog=2, overflow="dead_letter_oldest")
    produce(producer_api, *items(1), *items(1, start=1, delay_seconds=600))  # one delayed
    response = producer_api.post("/api/v1/messages", {"messages": items(2, start=2)})
    assert expect_error(response, 429, "backlog_full")["details"]["backlog"] == 2
    assert waiting() == ["0", "1"] and not Message.objects.exclude(status=Status.NEW).exists()
    produce(producer_api, *items(1, start=2))  # room for one: the deliverable one goes
    assert waiting() == ["1", "2"]


def test_reject_is_the_default_and_answers_429(admin_api: Api, producer_api: Api) -> None:
    assert make_topic(admin_api, max_backlog=1)["overflow"] == "reject"
    produce(producer_api, *items(1))
    expect_error(producer_api.post("/api/v1/messages", {"messages": items(1)}), 429, "backlog_full")


def test_a_topics_default_ttl_applies_to_messages_that_name_no_expiry(admin_api: Api, producer_api: Api) -> None:
    assert make_topic(admin_api, default_ttl_seconds=60)["default_ttl_seconds"] == 60
    plain, delayed, own = produce(producer_api, *items(1), *items(1, start=1, delay_seconds=100),
                                  *items(1, start=2, ttl_seconds=5))
    for entry, after_due in ((plain, 60), (delayed, 60)):
        message = Message.objects.get(id=entry["id"])
        assert message.expires_at - message.effect_time == timedelta(seconds=after_due)
    message = Message.objects.get(id=own["id"])
    assert timedelta(seconds=4) < message.expires_at - message.add_time <= timedelta(seconds=5)
    detail = admin_api.get(f"/api/v1/messages/{plain['id']}").json()
    assert parse_time(detail["expires_at"]) == Message.objects.get(id=plain["id"]).expires_at


@pytest.mark.parametrize(("body", "field"), [
    ({"overflow": "drop_newest"}, "overflow"), ({"default_ttl_seconds": 0}, "default_ttl_seconds"),
    ({"default_ttl_seconds": "60"}, "default_ttl_seconds")])
def test_bad_topic_defaults_answer_400(admin_api: Api, shop: Any, body: dict[str, Any], field: str) -> None:
    expect_error(admin_api.post("/api/v1/topics", {"topic": "orders", "biz": "shop", **body}), 400,
                 "invalid_request", field)
    assert not Topic.objects.filter(name="orders").exists()


def test_a_topic_without_max_backlog_locks_and_counts_nothing(producer_api: Api, admin_api: Api) -> None:
    make_topic(admin_api, groups=[{"group": "billing"}])
    with CaptureQueriesContext(connection) as queries:
        produce(producer_api, *items(20), *items(5, group="billing"))
    def group_locks(captured: list[dict[str, str]]) -> int:
        return sum("FOR UPDATE" in q["sql"].upper() and "TOPICGROUP" in q["sql"].upper() for q in captured)

    assert not any("COUNT(" in q["sql"].upper() for q in queries.captured_queries)
    assert group_locks(queries.captured_queries) == 0
    admin_api.patch("/api/v1/topics/orders", {"max_backlog": 100})
    with CaptureQueriesContext(connection) as queries:
        produce(producer_api, *items(20), *items(5, group="billing"))
    assert group_locks(queries.captured_queries) == 1  # both groups, one statement


def test_the_console_topic_form_sets_overflow_and_default_ttl(admin_api: Api, shop: Any) -> None:
    make_topic(admin_api)
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@example.org", "a-long-test-password-42"))
    url = reverse("console:topic", args=["orders"])
    page = client.get(url).content.decode()
    assert 'name="overflow"' in page and 'name="default_ttl_seconds"' in page
    form = {"biz": "shop", "owner": "", "description": "", "retry_strategy": "exponential", "retry_count": "3",
            "retry_interval_seconds": "10", "timeout_seconds": "60", "retention_days": "7", "max_backlog": "25",
            "overflow": "dead_letter_oldest", "default_ttl_seconds": "3600"}
    assert client.post(url, form).status_code == 303
    topic = Topic.objects.get(name="orders")
    assert (topic.overflow, topic.default_ttl_seconds) == ("dead_letter_oldest", 3600)
    assert 'value="dead_letter_oldest" selected' in client.get(url).content.decode()
    form["default_ttl_seconds"] = ""
    client.post(url, form)
    assert Topic.objects.get(name="orders").default_ttl_seconds is None
