"""Batches with a completion callback on the real database: every member's finish (success,
dead, expired, cancelled, a lease that expired) is counted in its transaction, the last one
produces exactly one callback, and bad input stores nothing."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from messages.batches.models import Batch
from messages.delivery.expiry import messages_expire
from messages.delivery.lifecycle import leases_recover
from messages.models import Message, Status
from tests.conftest import Api
from tests.support.api import ack, expect_error, pull
from topics.models import Topic, TopicGroup

pytestmark = pytest.mark.django_db


@pytest.fixture
def orders(shop) -> Topic:
    topic = Topic.objects.create(name="orders", biz=shop, retry_count=0)
    TopicGroup.objects.create(topic=topic, name="billing")
    TopicGroup.objects.create(topic=topic, name="audit")
    Topic.objects.create(name="orders.done", biz=shop)
    return topic


def create(api: Api, messages: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    response = api.post("/api/v1/batches", {"callback_topic": "orders.done", "messages": messages, **fields})
    assert response.status_code == 201, response.content
    return response.json()


def callbacks() -> list[Message]:
    return list(Message.objects.filter(topic="orders.done").order_by("id"))


def test_the_last_member_to_finish_produces_one_callback_with_the_counts(producer_api, consumer_api, orders):
    answer = create(producer_api, [{"topic": "orders", "data": 1},  # a publish: two copies
                                   {"topic": "orders", "data": 2, "group": "billing"},
                                   {"topic": "orders", "data": 3, "group": "billing", "ttl_seconds": 600}],
                    batch_id="b-1")
    assert answer["batch_id"] == "b-1" and len(answer["messages"]) == 4
    assert set(Message.objects.filter(topic="orders").values_list("batch_id", flat=True)) == {"b-1"}
    status = producer_api.get("/api/v1/batches/b-1").json()
    assert (status["total"], status["pending"], status["completed_at"]) == (4, 4, None)
    taken = pull(consumer_api, "orders", group="billing", max_messages=3)
    ack(consumer_api, "c1", {"id": taken[0]["id"], "status": "SUCCESS"},
        {"id": taken[1]["id"], "status": "FAIL", "retry": False})
    Message.objects.filter(id=taken[2]["id"]).update(status=Status.NEW, expires_at=timezone.now() - timedelta(seconds=1))
    messages_expire()
    status = producer_api.get("/api/v1/batches/b-1").json()
    assert (status["pending"], status["success"], status["dead"], status["expired"]) == (1, 1, 1, 1)
    assert callbacks() == []
    [audit] = pull(consumer_api, "orders", group="audit")
    admin_cancel = Message.objects.get(id=audit["id"])
    Message.objects.filter(id=admin_cancel.id).update(status=Status.NEW, lease_owner=None)
    from messages.services import message_cancel
    from mqcenter.core.auth import Principal

    message_cancel(principal=Principal(name="ops", scopes=("admin",), biz_ids=None), message_id=admin_cancel.id)
    [callback] = callbacks()
    assert callback.tag == "batch.completed" and callback.headers == {"mq-batch": "b-1"}
    assert json.loads(callback.data) == {"batch_id": "b-1", "total": 4, "success": 1, "dead": 1, "expired": 1,
                                         "cancelled": 1}
    status = producer_api.get("/api/v1/batches/b-1").json()
    assert status["pending"] == 0 and status["completed_at"] and status["callback_message_id"] == callback.id


def test_a_lease_that_expires_counts_its_member_dead(producer_api, consumer_api, orders):
    create(producer_api, [{"topic": "orders", "data": 1, "group": "billing"}], batch_id="b-2")
    [taken] = pull(consumer_api, "orders", group="billing")
    Message.objects.filter(id=taken["id"]).update(lease_expires_at=timezone.now() - timedelta(seconds=5))
    assert leases_recover() == 1
    assert Message.objects.get(id=taken["id"]).status == Status.TIMEOUT
    assert json.loads(callbacks()[0].data)["dead"] == 1


def test_a_retried_member_is_not_finished(producer_api, consumer_api, orders):
    Topic.objects.filter(name="orders").update(retry_count=1, retry_interval_seconds=0)
    create(producer_api, [{"topic": "orders", "data": 1, "group": "billing"}], batch_id="b-3")
    [taken] = pull(consumer_api, "orders", group="billing")
    ack(consumer_api, "c1", {"id": taken["id"], "status": "FAIL"})  # retry scheduled
    assert Batch.objects.get(id="b-3").pending == 1 and callbacks() == []


def test_a_requeued_dead_member_leaves_its_batch_and_is_not_counted_twice(producer_api, consumer_api, admin_api, orders):
    create(producer_api, [{"topic": "orders", "data": n, "group": "billing"} for n in range(2)], batch_id="b-4")
    first, second = pull(consumer_api, "orders", group="billing", max_messages=2)
    ack(consumer_api, "c1", {"id": first["id"], "status": "FAIL", "retry": False})
    assert admin_api.post("/api/v1/messages/redrive", {"ids": [first["id"]]}).status_code == 200
    assert Message.objects.get(id=first["id"]).batch_id is None
    [again] = pull(consumer_api, "orders", group="billing")
    ack(consumer_api, "c1", {"id": again["id"], "status": "SUCCESS"})
    assert Batch.objects.get(id="b-4").pending == 1 and callbacks() == []
    ack(consumer_api, "c1", {"id": second["id"], "status": "SUCCESS"})
    assert json.loads(callbacks()[0].data) == {"batch_id": "b-4", "total": 2, "success": 1, "dead": 1,
                                                   "expired": 0, "cancelled": 0}


def test_an_overflow_eviction_counts_as_expired(producer_api, admin_api, orders):
    admin_api.patch("/api/v1/topics/orders", {"max_backlog": 1, "overflow": "drop_oldest"})
    create(producer_api, [{"topic": "orders", "data": 1, "group": "billing"}], batch_id="b-5")
    create(producer_api, [{"topic": "orders", "data": 2, "group": "billing"}], batch_id="b-6")
    assert json.loads(callbacks()[0].data)["expired"] == 1
    assert Batch.objects.get(id="b-6").pending == 1


def test_an_empty_batch_of_duplicates_completes_at_once(producer_api, orders):
    body = [{"topic": "orders", "data": 1, "group": "billing", "dedup_key": "k"}]
    create(producer_api, body, batch_id="b-7")
    answer = create(producer_api, body, batch_id="b-8")
    assert answer["messages"][0]["duplicate"] is True
    assert Batch.objects.get(id="b-8").completed_at is not None
    assert json.loads(callbacks()[0].data)["total"] == 0


@pytest.mark.parametrize(("body", "status", "code", "field"), [
    ({"callback_topic": "orders.done", "messages": [{"topic": "orders", "data": 1}, {"topic": "orders"}]},
     400, "invalid_request", "messages[1].data"),
    ({"callback_topic": "elsewhere", "messages": [{"topic": "orders", "data": 1}]}, 403, "forbidden", "callback_topic"),
    ({"callback_topic": "orders.done", "batch_id": "a b", "messages": [{"topic": "orders", "data": 1}]},
     400, "invalid_request", "batch_id"),
    ({"callback_topic": "orders.done", "messages": [{"topic": "orders", "data": 1}], "extra": 1},
     400, "invalid_request", "extra"),
])
def test_bad_input_stores_nothing(producer_api, orders, body, status, code, field):
    expect_error(producer_api.post("/api/v1/batches", body), status, code, field)
    assert not Message.objects.exists() and not Batch.objects.exists()


def test_a_taken_batch_id_answers_409_and_stores_nothing(producer_api, orders):
    create(producer_api, [{"topic": "orders", "data": 1, "group": "billing"}], batch_id="same")
    response = producer_api.post("/api/v1/batches", {"callback_topic": "orders.done", "batch_id": "same",
                                                     "messages": [{"topic": "orders", "data": 2, "group": "billing"}]})
    expect_error(response, 409, "conflict", "batch_id")
    assert Message.objects.count() == 1


def test_another_lines_batch_answers_404(producer_api, orders, other_biz):
    from tests.conftest import make_api

    create(producer_api, [{"topic": "orders", "data": 1, "group": "billing"}], batch_id="mine")
    outsider = make_api(["produce:*"], other_biz)
    expect_error(outsider.get("/api/v1/batches/mine"), 404, "not_found")


def test_the_console_shows_each_batchs_progress(producer_api, consumer_api, clients, orders):
    create(producer_api, [{"topic": "orders", "data": n, "group": "billing"} for n in range(4)], batch_id="b-9")
    taken = pull(consumer_api, "orders", group="billing", max_messages=1)
    ack(consumer_api, "c1", {"id": taken[0]["id"], "status": "SUCCESS"})
    page = clients["viewer"].get("/batches/").content.decode()
    row = page[page.index('data-batch="b-9"'):]
    row = row[: row.index("</tr>")]
    assert 'max="4" value="1"' in row and "1 / 4 (25%)" in row and "running" in row


def test_the_console_message_page_shows_tag_batch_and_dedup_window(producer_api, clients, orders):
    answer = create(producer_api, [{"topic": "orders", "data": 1, "group": "billing", "tag": "paid",
                                    "dedup_key": "k-1", "dedup_seconds": 600}], batch_id="b-10")
    page = clients["viewer"].get(f"/messages/{answer['messages'][0]['id']}/").content.decode()
    assert 'id="message-tag">paid<' in page and ">b-10</a>" in page and "unique until" in page
    zh = clients["viewer"].get(f"/messages/{answer['messages'][0]['id']}/", HTTP_ACCEPT_LANGUAGE="zh-CN").content.decode()
    assert "标签" in zh and "之前唯一" in zh


def test_acks_carried_by_a_pull_count_towards_the_batch(producer_api, consumer_api, orders):
    create(producer_api, [{"topic": "orders", "data": n, "group": "billing"} for n in range(3)], batch_id="b-11")
    produce_plain = producer_api.post("/api/v1/messages", {"messages": [{"topic": "orders", "data": 9, "group": "billing"}]})
    assert produce_plain.status_code == 201
    taken = pull(consumer_api, "orders", group="billing", max_messages=4)
    response = consumer_api.post("/api/v1/pull", {"topic": "orders", "group": "billing", "consumer": "c1",
                                                  "results": [{"id": m["id"], "status": "SUCCESS"} for m in taken]})
    assert response.status_code == 200, response.content
    assert [r["outcome"] for r in response.json()["results"]] == ["success"] * 4
    assert Batch.objects.get(id="b-11").pending == 0
    assert json.loads(callbacks()[0].data)["success"] == 3
    assert Message.objects.filter(topic="orders", status=Status.SUCCESS).count() == 4


def test_a_missing_callback_topic_is_created_only_where_produce_would(producer_api, orders):
    from django.test import override_settings

    with override_settings(MQ_AUTO_CREATE_TOPICS=False):
        response = producer_api.post("/api/v1/batches", {"callback_topic": "orders.nowhere",
                                                         "messages": [{"topic": "orders", "data": 1}]})
        assert response.status_code == 404, response.content
    assert not Message.objects.exists() and not Batch.objects.exists()
    assert not Topic.objects.filter(name="orders.nowhere").exists()
    create(producer_api, [{"topic": "orders", "data": 1, "group": "billing"}], callback_topic="orders.made")
    assert Topic.objects.filter(name="orders.made").exists()


def test_the_cleanup_removes_completed_batches_after_the_archive_retention(producer_api, orders):
    from django.test import override_settings

    from messages.archive.services import maintenance_cleanup

    create(producer_api, [{"topic": "orders", "data": 1, "group": "billing"}], batch_id="open")
    for name, days in (("old", 91), ("recent", 89)):
        Batch.objects.create(id=name, callback_topic="orders.done", created_at=timezone.now(),
                             completed_at=timezone.now() - timedelta(days=days))
    with override_settings(MQ_ARCHIVE_RETENTION_DAYS=90):
        assert maintenance_cleanup()["batches_purged"] == 1
    assert sorted(Batch.objects.values_list("id", flat=True)) == ["open", "recent"]
