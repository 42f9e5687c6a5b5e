"""POST /api/v1/messages: batches, validation, dedup, broadcast, delays, topic defaults."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from messages.delivery.sql_insert import INSERT_CHUNK
from messages.delivery.validation import data_text
from messages.models import Message, MessageTrace
from tests.support.api import expect_error, parse_time, produce, pull
from topics.models import Topic, TopicGroup

pytestmark = pytest.mark.django_db


def test_it_stores_a_message_and_answers_201_with_its_id(producer_api, consumer_api):
    [entry] = produce(producer_api, {"topic": "orders", "data": {"order": 42}})
    assert entry["topic"] == "orders" and entry["group"] == "default"
    assert entry["status"] == "NEW" and entry["duplicate"] is False
    row = Message.objects.get(id=entry["id"])
    assert row.status == "NEW" and row.attempt == 0
    [delivered] = pull(consumer_api, "orders")
    assert delivered["id"] == entry["id"] and delivered["data"] == {"order": 42}


def test_it_round_trips_every_message_field(producer_api, consumer_api):
    [entry] = produce(producer_api, {
        "topic": "orders", "data": [1, "two", None, {"x": 1.5}], "group": "billing", "key": "customer-7",
        "retry_count": 3, "timeout_seconds": 90, "dedup_key": "order-42", "headers": {"trace": "abc"},
    })
    [m] = pull(consumer_api, "orders", group="billing")
    assert m["id"] == entry["id"] and entry["group"] == "billing"
    assert m["data"] == [1, "two", None, {"x": 1.5}]
    assert m["key"] == "customer-7" and m["headers"] == {"trace": "abc"}
    assert m["retry_remaining"] == 3 and m["timeout_seconds"] == 90 and m["attempt"] == 1
    for field in ("effect_time", "add_time", "lease_expires_at"):
        assert parse_time(m[field]).tzinfo is not None


def test_it_accepts_a_batch_of_1000_in_order(producer_api):
    items = [{"topic": "orders", "data": i} for i in range(1000)]
    entries = produce(producer_api, *items)
    assert len(entries) == 1000
    ids = [e["id"] for e in entries]
    assert ids == sorted(ids) and len(set(ids)) == 1000
    assert [m.data for m in Message.objects.filter(id__in=ids).order_by("id")] == [str(i) for i in range(1000)]


def test_a_batch_keeps_quotes_backslashes_braces_and_the_word_null_as_sent(producer_api):
    """On PostgreSQL each column is one array literal: what its syntax treats specially stays data."""
    tricky = 'a"b\\c,{d}} e\n"NULL" é ✓'
    key = tricky.replace("\n", " ")  # a key or header holds no line break
    items = [{"topic": "orders", "data": {"s": tricky, "n": i}, "key": "NULL" if i else key,
              "headers": {"h": key, "q": '"'}} for i in range(3)]
    entries = produce(producer_api, *items)
    rows = {m.id: m for m in Message.objects.filter(id__in=[e["id"] for e in entries])}
    for i, entry in enumerate(entries):
        row = rows[entry["id"]]
        assert row.data == data_text({"s": tricky, "n": i})
        assert row.key == ("NULL" if i else key) and row.headers == {"h": key, "q": '"'}


def test_a_batch_whose_rows_differ_in_every_column_stores_each_row_as_sent(producer_api):
    """A batch goes to the database column by column (one escaped list per column on MariaDB,
    one array per column on PostgreSQL): each answered id's row holds its own values, a
    column of mixed NULLs and values and one of NULLs only included."""
    now = timezone.now()
    items = []
    for i in range(7):
        item = {"topic": "orders", "data": {"n": i}, "priority": i, "headers": {"h": str(i)} if i % 3 else {}}
        if i % 2:
            item["key"] = f"k{i}"
            item["dedup_key"] = f"d{i}"
        if i % 4 == 0:
            item["delay_seconds"] = 60 + i
        items.append(item)
    entries = produce(producer_api, *items)
    rows = {m.id: m for m in Message.objects.filter(id__in=[e["id"] for e in entries])}
    for i, entry in enumerate(entries):
        row = rows[entry["id"]]
        assert row.data == data_text({"n": i})
        assert row.priority == i and row.headers == ({"h": str(i)} if i % 3 else {})
        assert (row.key, row.dedup_key) == ((f"k{i}", f"d{i}") if i % 2 else (None, None))
        assert row.expires_at is None and row.batch_id is None
        if i % 4 == 0:
            assert row.effect_time >= now + timedelta(seconds=60 + i)
        else:
            assert row.effect_time < now + timedelta(seconds=60)


def test_it_refuses_a_batch_of_1001_and_stores_nothing(producer_api):
    items = [{"topic": "orders", "data": i} for i in range(1001)]
    expect_error(producer_api.post("/api/v1/messages", {"messages": items}), 400, "invalid_request", "messages")
    assert Message.objects.count() == 0


@pytest.mark.parametrize(
    ("bad_item", "field"),
    [
        ({"topic": "orders"}, "messages[3].data"),
        ({"data": 1}, "messages[3].topic"),
        ({"topic": "bad topic!", "data": 1}, "messages[3].topic"),
        ({"topic": "orders", "data": 1, "group": ""}, "messages[3].group"),
        ({"topic": "orders", "data": 1, "key": "k" * 129}, "messages[3].key"),
        ({"topic": "orders", "data": 1, "headers": {"a": 1}}, "messages[3].headers.a"),
        ({"topic": "orders", "data": 1, "headers": ["a"]}, "messages[3].headers"),
        ({"topic": "orders", "data": 1, "delay_seconds": -1}, "messages[3].delay_seconds"),
        ({"topic": "orders", "data": 1, "delay_seconds": "5"}, "messages[3].delay_seconds"),
        ({"topic": "orders", "data": 1, "effect_time": "tomorrow"}, "messages[3].effect_time"),
        ({"topic": "orders", "data": 1, "effect_time": "2030-01-01T00:00:00"}, "messages[3].effect_time"),
        ({"topic": "orders", "data": 1, "effect_time": "2030-01-01T12:99:00Z"}, "messages[3].effect_time"),
        ({"topic": "orders", "data": 1, "retry_count": -1}, "messages[3].retry_count"),
        ({"topic": "orders", "data": 1, "retry_count": 1.5}, "messages[3].retry_count"),
        ({"topic": "orders", "data": 1, "retry_count": True}, "messages[3].retry_count"),
        ({"topic": "orders", "data": 1, "timeout_seconds": 0}, "messages[3].timeout_seconds"),
        ({"topic": "orders", "data": 1, "dedup_key": 7}, "messages[3].dedup_key"),
        ({"topic": "orders", "data": 1, "broadcast": "yes"}, "messages[3].broadcast"),
        ({"topic": "orders", "data": 1, "broadcast": True, "group": "g"}, "messages[3].group"),
        ({"topic": "orders", "data": 1, "colour": "red"}, "messages[3].colour"),
        ("not an object", "messages[3]"),
    ],
)
def test_it_refuses_a_batch_with_one_bad_item_and_stores_nothing(producer_api, bad_item, field):
    items = [{"topic": "orders", "data": i} for i in range(5)]
    items[3] = bad_item
    response = producer_api.post("/api/v1/messages", {"messages": items})
    expect_error(response, 400, "invalid_request", field)
    assert Message.objects.count() == 0
    assert MessageTrace.objects.count() == 0


def test_a_missing_topic_is_called_required_and_a_bad_one_names_the_rule(producer_api):
    missing = producer_api.post("/api/v1/messages", {"messages": [{"data": 1}]}).json()["error"]
    assert missing["message"] == "messages[0].topic: is required."
    bad = producer_api.post("/api/v1/messages", {"messages": [{"topic": "a b", "data": 1}]}).json()["error"]
    assert bad["message"].startswith("messages[0].topic: must match ^[A-Za-z0-9]")


def test_a_body_that_is_not_json_is_refused_in_one_plain_sentence(producer_api):
    error = expect_error(producer_api.post("/api/v1/messages", raw=b'{"messages": ['), 400, "invalid_request")
    assert error["message"] == "The body is not valid JSON: Expecting value: line 1 column 15 (char 14)"


@pytest.mark.parametrize("body", [{}, {"messages": []}, {"messages": {}}, [], {"messages": None}])
def test_it_refuses_a_body_without_messages(producer_api, body):
    expect_error(producer_api.post("/api/v1/messages", body), 400, "invalid_request", "messages" if isinstance(body, dict) else "")


def test_it_refuses_oversized_data_with_413_naming_the_item(producer_api):
    with override_settings(MQ_MAX_DATA_BYTES=1024):
        items = [{"topic": "orders", "data": "x"}, {"topic": "orders", "data": "y" * 2000}]
        response = producer_api.post("/api/v1/messages", {"messages": items})
    expect_error(response, 413, "payload_too_large", "messages[1].data")
    assert Message.objects.count() == 0


def test_it_refuses_a_topic_outside_the_produce_scope_with_403(producer_api):
    response = producer_api.post("/api/v1/messages", {"messages": [
        {"topic": "orders", "data": 1}, {"topic": "payments", "data": 2}]})
    expect_error(response, 403, "forbidden", "messages[1].topic")
    assert Message.objects.count() == 0


def test_it_returns_the_stored_message_for_a_repeated_dedup_key(producer_api):
    [first] = produce(producer_api, {"topic": "orders", "data": 1, "dedup_key": "order-42"})
    [again] = produce(producer_api, {"topic": "orders", "data": 2, "dedup_key": "order-42"})
    assert again["duplicate"] is True and again["id"] == first["id"]
    assert Message.objects.count() == 1
    assert Message.objects.get().data == "1"


def test_it_dedups_within_one_batch_and_per_group(producer_api):
    entries = produce(
        producer_api,
        {"topic": "orders", "data": 1, "dedup_key": "k", "group": "default"},
        {"topic": "orders", "data": 2, "dedup_key": "k", "group": "default"},
        {"topic": "orders", "data": 3, "dedup_key": "k", "group": "other"},
    )
    assert [e["duplicate"] for e in entries] == [False, True, False]
    assert entries[0]["id"] == entries[1]["id"] != entries[2]["id"]
    assert Message.objects.count() == 2


def test_new_dedup_keys_are_inserted_without_being_looked_up_first(producer_api):
    produce(producer_api, {"topic": "orders", "data": 0})  # the topic and its group exist now
    with CaptureQueriesContext(connection) as queries:
        produce(producer_api, {"topic": "orders", "data": 1, "dedup_key": "a"},
                {"topic": "orders", "data": 2, "dedup_key": "b"})
    statements = [q["sql"] for q in queries.captured_queries]
    assert not [sql for sql in statements if sql.startswith("SELECT") and "dedup_key" in sql], statements
    assert Message.objects.filter(dedup_key__in=["a", "b"]).count() == 2


def test_a_batch_mixing_stored_and_new_dedup_keys_stores_only_the_new(producer_api):
    [stored] = produce(producer_api, {"topic": "orders", "data": 1, "dedup_key": "old"})
    entries = produce(producer_api, {"topic": "orders", "data": 2, "dedup_key": "new"},
                      {"topic": "orders", "data": 3, "dedup_key": "old"})
    assert [e["duplicate"] for e in entries] == [False, True]
    assert entries[1]["id"] == stored["id"]
    assert sorted(Message.objects.values_list("dedup_key", "data")) == [("new", "2"), ("old", "1")]


@pytest.mark.django_db(transaction=True)
def test_a_batch_of_two_inserts_whose_second_fails_is_stored_once(producer_api):
    """One INSERT commits on its own; a batch bigger than one (INSERT_CHUNK rows) takes a
    transaction. Here the second INSERT meets a stored dedup key: the first one's rows must
    go with it, or the retry (with the dedup look-up) would store them twice."""
    [stored] = produce(producer_api, {"topic": "orders", "data": "old", "dedup_key": "old"})
    items = [{"topic": "orders", "data": i} for i in range(INSERT_CHUNK + 100)]
    items[INSERT_CHUNK + 50]["dedup_key"] = "old"
    entries = produce(producer_api, *items)
    assert [e["duplicate"] for e in entries].count(True) == 1
    assert entries[INSERT_CHUNK + 50]["id"] == stored["id"]
    assert Message.objects.count() == len(items)  # the stored one and every new one, once


def test_it_broadcasts_to_declared_and_registered_groups(admin_api, producer_api, consumer_api):
    response = admin_api.post("/api/v1/topics", {
        "topic": "orders", "biz": "shop", "groups": [{"group": "billing"}, {"group": "audit", "mode": "serial"}]})
    assert response.status_code == 201, response.content
    heartbeat = consumer_api.post("/api/v1/registry/consumers", {
        "consumer": "host-a:1:x", "subscriptions": [{"topic": "orders", "group": "shipping"}]})
    assert heartbeat.status_code == 200, heartbeat.content
    entries = produce(producer_api, {"topic": "orders", "data": {"b": 1}, "broadcast": True})
    assert sorted(e["group"] for e in entries) == ["audit", "billing", "shipping"]
    assert len({e["id"] for e in entries}) == 3
    for group in ("audit", "billing", "shipping"):
        [m] = pull(consumer_api, "orders", group=group)
        assert m["data"] == {"b": 1}


def test_it_delays_by_delay_seconds(producer_api, consumer_api):
    before = timezone.now()
    [entry] = produce(producer_api, {"topic": "orders", "data": 1, "delay_seconds": 3600})
    assert pull(consumer_api, "orders") == []
    row = Message.objects.get(id=entry["id"])
    assert row.effect_time >= before + timedelta(seconds=3599)
    Message.objects.filter(id=row.id).update(effect_time=timezone.now() - timedelta(seconds=1))
    assert [m["id"] for m in pull(consumer_api, "orders")] == [entry["id"]]


def test_it_delays_until_effect_time(producer_api, consumer_api):
    due = (timezone.now() + timedelta(hours=2)).replace(microsecond=0)
    [entry] = produce(producer_api, {"topic": "orders", "data": 1, "effect_time": due.isoformat()})
    assert pull(consumer_api, "orders") == []
    assert Message.objects.get(id=entry["id"]).effect_time == due


def test_it_refuses_both_delay_seconds_and_effect_time(producer_api):
    response = producer_api.post("/api/v1/messages", {"messages": [{
        "topic": "orders", "data": 1, "delay_seconds": 5, "effect_time": timezone.now().isoformat()}]})
    expect_error(response, 400, "invalid_request", "messages[0].effect_time")


def test_it_takes_topic_defaults_unless_the_message_overrides_them(admin_api, producer_api):
    response = admin_api.post("/api/v1/topics", {"topic": "orders", "biz": "shop", "retry_count": 5,
                                                 "timeout_seconds": 120})
    assert response.status_code == 201
    default, custom = produce(
        producer_api, {"topic": "orders", "data": 1},
        {"topic": "orders", "data": 2, "retry_count": 0, "timeout_seconds": 7},
    )
    a, b = Message.objects.get(id=default["id"]), Message.objects.get(id=custom["id"])
    assert (a.retry_remaining, a.timeout_seconds) == (5, 120)
    assert (b.retry_remaining, b.timeout_seconds) == (0, 7)


def test_it_auto_creates_an_unknown_topic_owned_by_the_token_biz(producer_api, shop):
    produce(producer_api, {"topic": "orders.new", "data": 1, "group": "g1"})
    topic = Topic.objects.get(name="orders.new")
    assert topic.biz_id == shop.id and topic.retry_count == 3 and topic.timeout_seconds == 60
    assert TopicGroup.objects.get(topic=topic, name="g1").subscribed is False  # a message naming a group does not subscribe it


def test_it_refuses_an_unknown_topic_when_auto_creation_is_off(producer_api):
    with override_settings(MQ_AUTO_CREATE_TOPICS=False):
        response = producer_api.post("/api/v1/messages", {"messages": [{"topic": "orders", "data": 1}]})
    expect_error(response, 404, "not_found")
    assert Message.objects.count() == 0 and not Topic.objects.filter(name="orders").exists()


def test_it_accepts_messages_for_a_paused_topic_but_pull_returns_none(admin_api, producer_api, consumer_api):
    assert admin_api.post("/api/v1/topics", {"topic": "orders", "biz": "shop", "paused": True}).status_code == 201
    [entry] = produce(producer_api, {"topic": "orders", "data": 1})
    assert Message.objects.get(id=entry["id"]).status == "NEW"
    assert pull(consumer_api, "orders") == []
    assert admin_api.patch("/api/v1/topics/orders", {"paused": False}).status_code == 200
    assert [m["id"] for m in pull(consumer_api, "orders")] == [entry["id"]]


def test_it_refuses_produce_into_another_biz_topic(admin_api, outsider_api, shop):
    assert admin_api.post("/api/v1/topics", {"topic": "orders", "biz": "shop"}).status_code == 201
    response = outsider_api.post("/api/v1/messages", {"messages": [{"topic": "orders", "data": 1}]})
    expect_error(response, 404, "not_found")  # as a topic that does not exist
    assert Message.objects.count() == 0


def test_it_refuses_a_consume_only_token(consumer_api):
    response = consumer_api.post("/api/v1/messages", {"messages": [{"topic": "orders", "data": 1}]})
    expect_error(response, 403, "forbidden", "messages[0].topic")


def test_it_refuses_produce_without_a_token(anonymous_api):
    expect_error(anonymous_api.post("/api/v1/messages", {"messages": [{"topic": "orders", "data": 1}]}),
                 401, "unauthenticated")
