"""Request/reply on the real database: `reply_to` and `correlation_id` are stored, answered by
produce, pull and detail, a missing correlation id is made up, and bad values answer 400."""

from __future__ import annotations

import pytest

from messages.models import Message
from tests.support.api import expect_error, produce, pull
from topics.models import Topic, TopicGroup

pytestmark = pytest.mark.django_db


@pytest.fixture
def orders(shop) -> Topic:
    topic = Topic.objects.create(name="orders", biz=shop)
    TopicGroup.objects.create(topic=topic, name="billing")
    return topic


def test_a_request_carries_reply_to_and_a_correlation_id_to_its_consumer(producer_api, consumer_api, admin_api, orders):
    [made_up] = produce(producer_api, {"topic": "orders", "data": 1, "reply_to": "orders.reply"})
    assert len(made_up["correlation_id"]) == 32
    [given] = produce(producer_api, {"topic": "orders", "data": 2, "reply_to": "orders.reply", "correlation_id": "c-7",
                                     "headers": {"trace": "t"}})
    assert given["correlation_id"] == "c-7"
    first, second = pull(consumer_api, "orders", group="billing", max_messages=2)
    assert (first["reply_to"], first["correlation_id"]) == ("orders.reply", made_up["correlation_id"])
    assert (second["reply_to"], second["correlation_id"]) == ("orders.reply", "c-7")
    assert second["headers"] == {"trace": "t", "mq-reply-to": "orders.reply", "mq-correlation-id": "c-7"}
    detail = admin_api.get(f"/api/v1/messages/{given['id']}").json()
    assert detail["correlation_id"] == "c-7" and detail["reply_to"] == "orders.reply"


def test_a_reply_names_the_correlation_id_only(producer_api, consumer_api, orders):
    [reply] = produce(producer_api, {"topic": "orders", "data": "pong", "group": "billing", "correlation_id": "c-7"})
    assert reply["correlation_id"] == "c-7"
    [got] = pull(consumer_api, "orders", group="billing")
    assert got["reply_to"] is None and got["correlation_id"] == "c-7"


def test_a_message_without_them_answers_nulls_and_no_correlation_id(producer_api, consumer_api, orders):
    [entry] = produce(producer_api, {"topic": "orders", "data": 1, "group": "billing"})
    assert "correlation_id" not in entry
    [got] = pull(consumer_api, "orders", group="billing")
    assert got["reply_to"] is None and got["correlation_id"] is None


@pytest.mark.parametrize(("fields", "field"), [
    ({"reply_to": "no spaces"}, "messages[0].reply_to"),
    ({"reply_to": "orders.reply", "correlation_id": "x" * 129}, "messages[0].correlation_id"),
    ({"correlation_id": 7}, "messages[0].correlation_id"),
])
def test_bad_values_answer_400(producer_api, orders, fields, field):
    expect_error(producer_api.post("/api/v1/messages", {"messages": [{"topic": "orders", "data": 1, **fields}]}),
                 400, "invalid_request", field)
    assert not Message.objects.exists()
