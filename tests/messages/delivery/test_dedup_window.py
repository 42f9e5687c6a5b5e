"""Uniqueness for a time window and refusing duplicates, on the real database: a key with
`dedup_seconds` is free again once its window passed; `dedup_conflict: "reject"` answers
409 duplicate naming the first message; and the default answers the first message."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from messages.models import Message
from tests.support.api import expect_error, produce
from topics.models import Topic, TopicGroup

pytestmark = pytest.mark.django_db


@pytest.fixture
def orders(shop) -> Topic:
    topic = Topic.objects.create(name="orders", biz=shop)
    TopicGroup.objects.create(topic=topic, name="billing")
    return topic


def item(data: int, **fields) -> dict:
    return {"topic": "orders", "data": data, "group": "billing", "dedup_key": "order-42", **fields}


def test_a_key_with_a_window_is_free_again_once_it_passed(producer_api, orders):
    [first] = produce(producer_api, item(1, dedup_seconds=60))
    assert Message.objects.get(id=first["id"]).dedup_until is not None
    [again] = produce(producer_api, item(2, dedup_seconds=60))
    assert again == {**first, "duplicate": True}
    Message.objects.filter(id=first["id"]).update(dedup_until=timezone.now() - timedelta(seconds=1))
    [later] = produce(producer_api, item(3, dedup_seconds=60))
    assert later["duplicate"] is False and later["id"] != first["id"]
    old = Message.objects.get(id=first["id"])
    assert old.dedup_key is None and "order-42" in old.last_log and old.data == "1"
    assert Message.objects.get(id=later["id"]).dedup_key == "order-42"


def test_a_key_without_a_window_stays_taken_while_the_message_is_kept(producer_api, orders):
    [first] = produce(producer_api, item(1))
    assert Message.objects.get(id=first["id"]).dedup_until is None
    [again] = produce(producer_api, item(2, dedup_seconds=1))  # the first one's rule holds
    assert again["duplicate"] is True and again["id"] == first["id"]


def test_reject_answers_409_duplicate_naming_the_first_and_stores_nothing(producer_api, orders):
    [first] = produce(producer_api, item(1))
    response = producer_api.post("/api/v1/messages", {"messages": [
        {"topic": "orders", "data": 0, "group": "billing"}, item(2, dedup_conflict="reject")]})
    error = expect_error(response, 409, "duplicate", "messages[1].dedup_key")
    assert error["details"]["first_id"] == first["id"]
    assert Message.objects.count() == 1
    [same] = produce(producer_api, item(3, dedup_conflict="first"))
    assert same["duplicate"] is True and same["id"] == first["id"]


def test_reject_refuses_a_repeat_within_one_batch(producer_api, orders):
    response = producer_api.post("/api/v1/messages", {"messages": [item(1), item(2, dedup_conflict="reject")]})
    assert expect_error(response, 409, "duplicate", "messages[1].dedup_key")["details"]["first_id"] is None
    assert not Message.objects.exists()


@pytest.mark.parametrize(("fields", "field"), [
    ({"dedup_seconds": 0}, "messages[0].dedup_seconds"),
    ({"dedup_seconds": 30 * 86400 + 1}, "messages[0].dedup_seconds"),
    ({"dedup_seconds": "60"}, "messages[0].dedup_seconds"),
    ({"dedup_conflict": "latest"}, "messages[0].dedup_conflict"),
])
def test_bad_window_settings_answer_400(producer_api, orders, fields, field):
    expect_error(producer_api.post("/api/v1/messages", {"messages": [item(1, **fields)]}), 400, "invalid_request", field)
    body = {"topic": "orders", "data": 1, "dedup_seconds": 60}
    expect_error(producer_api.post("/api/v1/messages", {"messages": [body]}), 400, "invalid_request",
                 "messages[0].dedup_seconds")
    assert not Message.objects.exists()


def test_the_sdk_builds_the_window_fields_and_maps_409_duplicate():
    from mqclient.errors import Conflict, Duplicate, api_error_class
    from mqclient.outgoing import build_message

    out = build_message("orders", 1, dedup_key="k", dedup_seconds=60, dedup_conflict="reject")
    assert out.body["dedup_seconds"] == 60 and out.body["dedup_conflict"] == "reject"
    assert api_error_class(409, "duplicate") is Duplicate and issubclass(Duplicate, Conflict)
