"""A transactional publish is copied to the groups subscribed when it commits, not when it
was prepared: a group subscribed in between gets its copy once (also when it replays
history), a group deleted in between gets none, and `default` keeps none once a group
subscribed."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from messages.models import Message, Status
from messages.operations.bulk import bulk_job_run
from messages.operations.models import BulkJob
from messages.transactions.models import Transaction
from messages.transactions.services import transactions_check
from tests.conftest import Api
from tests.support.api import expect_error, produce
from topics.models import Topic, TopicGroup

pytestmark = pytest.mark.django_db

CHECK_URL = "http://127.0.0.1:9/check"


@pytest.fixture(autouse=True)
def _check_hosts() -> Iterator[None]:
    with override_settings(MQ_TRANSACTION_CHECK_HOSTS=["127.0.0.1:9"]):
        yield


@pytest.fixture
def orders(shop) -> Topic:
    topic = Topic.objects.create(name="orders", biz=shop)
    TopicGroup.objects.create(topic=topic, name="g1")
    return topic


def prepare(api: Api, *items: dict[str, Any]) -> dict[str, Any]:
    response = api.post("/api/v1/messages", {
        "messages": list(items), "transaction": {"check_url": CHECK_URL, "check_after_seconds": 3600},
    })
    assert response.status_code == 201, response.content
    return response.json()


def commit(api: Api, answer: dict[str, Any]) -> None:
    response = api.post(f"/api/v1/transactions/{answer['transaction_id']}/commit", {})
    assert response.status_code == 200, response.content


def copies() -> dict[str, list[tuple[str, str]]]:
    found: dict[str, list[tuple[str, str]]] = {}
    for group, data, status in Message.objects.order_by("id").values_list("group_name", "data", "status"):
        found.setdefault(group, []).append((data, status))
    return found


@pytest.mark.parametrize("start", ["latest", "earliest"])
def test_a_group_subscribed_between_prepare_and_commit_gets_the_publish_once(
    admin_api: Api, producer_api: Api, orders: Topic, start: str,
) -> None:
    answer = prepare(producer_api, {"topic": "orders", "data": 1}, {"topic": "orders", "data": 2})
    assert admin_api.post("/api/v1/topics/orders/groups", {"group": "g2", "start": start}).status_code == 201
    assert copies()["g1"] == [("1", "PREPARED"), ("2", "PREPARED")]
    assert "g2" not in copies()  # a replay leaves an open transaction out

    commit(producer_api, answer)
    assert copies() == {"g1": [("1", "NEW"), ("2", "NEW")], "g2": [("1", "NEW"), ("2", "NEW")]}
    late = Message.objects.filter(group_name="g2").order_by("id")
    originals = {m.id: m for m in Message.objects.filter(group_name="g1")}
    for copy in late:
        source = originals[int(copy.headers["mq-commit-copy-of"])]
        assert (copy.publish_id, copy.add_time, copy.producer) == (source.publish_id, source.add_time, source.producer)
    txn = Transaction.objects.get(id=answer["transaction_id"])
    assert sorted(txn.message_ids) == sorted(Message.objects.values_list("id", flat=True))
    pulled = admin_api.post("/api/v1/pull", {"topic": "orders", "group": "g2", "consumer": "c", "max_messages": 10})
    assert sorted(m["data"] for m in pulled.json()["messages"]) == [1, 2]


def test_a_replay_job_running_across_the_commit_copies_the_publish_once(
    admin_api: Api, producer_api: Api, orders: Topic,
) -> None:
    produce(producer_api, {"topic": "orders", "data": 0})
    answer = prepare(producer_api, {"topic": "orders", "data": 1})
    with override_settings(MQ_REDRIVE_SYNC_LIMIT=0):  # the replay is a job, run after the commit
        created = admin_api.post("/api/v1/topics/orders/groups", {"group": "g2", "start": "earliest"})
    assert created.status_code == 202, created.content
    commit(producer_api, answer)
    bulk_job_run(job_id=created.json()["job"])
    assert BulkJob.objects.get(id=created.json()["job"]).state == "done"
    assert sorted(copies()["g2"]) == [("0", "NEW"), ("1", "NEW")]


def test_a_publish_prepared_into_default_goes_to_the_group_subscribed_before_the_commit(
    admin_api: Api, producer_api: Api, shop,
) -> None:
    Topic.objects.create(name="orders", biz=shop)
    answer = prepare(producer_api, {"topic": "orders", "data": 7})
    assert copies() == {"default": [("7", "PREPARED")]}
    assert admin_api.post("/api/v1/topics/orders/groups", {"group": "g1"}).status_code == 201
    commit(producer_api, answer)
    assert copies() == {"g1": [("7", "NEW")]}
    assert Transaction.objects.get(id=answer["transaction_id"]).message_ids == list(
        Message.objects.values_list("id", flat=True))


def test_a_group_deleted_between_prepare_and_commit_gets_nothing(
    admin_api: Api, producer_api: Api, orders: Topic,
) -> None:
    TopicGroup.objects.create(topic=orders, name="g2")
    answer = prepare(producer_api, {"topic": "orders", "data": 1, "dedup_key": "k"})
    assert admin_api.delete("/api/v1/topics/orders/groups/g2").status_code == 204
    commit(producer_api, answer)
    assert copies() == {"g1": [("1", "NEW")]}
    assert Message.objects.get(group_name="g1").status == Status.NEW


def test_a_publish_whose_only_group_was_replaced_before_the_commit_reaches_the_new_group(
    admin_api: Api, producer_api: Api, orders: Topic,
) -> None:
    answer = prepare(producer_api, {"topic": "orders", "data": 1})
    assert admin_api.delete("/api/v1/topics/orders/groups/g1").status_code == 204
    assert admin_api.post("/api/v1/topics/orders/groups", {"group": "g3"}).status_code == 201
    commit(producer_api, answer)
    assert copies() == {"g3": [("1", "NEW")]}
    # Re-created under its old name, a group gets the publish as any group subscribed at the commit.
    again = prepare(producer_api, {"topic": "orders", "data": 2})
    assert admin_api.delete("/api/v1/topics/orders/groups/g3").status_code == 204
    assert admin_api.post("/api/v1/topics/orders/groups", {"group": "g3"}).status_code == 201
    commit(producer_api, again)
    assert copies() == {"g3": [("2", "NEW")]}  # the old g3's waiting "1" went with it


def test_the_check_back_gives_up_as_each_topic_says_rollback_by_default(
    admin_api: Api, producer_api: Api, orders: Topic, shop,
) -> None:
    Topic.objects.create(name="orders.b", biz=shop)
    assert admin_api.get("/api/v1/topics/orders").json()["check_give_up"] == "rollback"
    changed = admin_api.patch("/api/v1/topics/orders", {"check_give_up": "commit"})
    assert changed.status_code == 200 and changed.json()["check_give_up"] == "commit"
    expect_error(admin_api.patch("/api/v1/topics/orders", {"check_give_up": "maybe"}), 400, "invalid_request")
    committing = prepare(producer_api, {"topic": "orders", "data": 1})
    mixed = prepare(producer_api, {"topic": "orders", "data": 2}, {"topic": "orders.b", "data": 3})

    with override_settings(MQ_TRANSACTION_GIVE_UP_SECONDS=60):
        counts = transactions_check(now=timezone.now() + timedelta(seconds=61))
    assert (counts["committed"], counts["rolled_back"]) == (1, 1)
    done = Transaction.objects.get(id=committing["transaction_id"])
    assert done.state == "committed" and "check_give_up is commit" in done.log[-1]["log"]
    assert Message.objects.get(id=committing["messages"][0]["id"]).status == Status.NEW
    # orders.b keeps the default: a transaction over both topics is rolled back.
    assert Transaction.objects.get(id=mixed["transaction_id"]).state == "rolled_back"
    assert not Message.objects.filter(id__in=[m["id"] for m in mixed["messages"]]).exists()


def test_the_topic_form_shows_and_saves_the_give_up_outcome(orders: Topic, django_user_model, client) -> None:
    client.force_login(django_user_model.objects.create_superuser("boss", password="pw-123456789"))
    page = client.get("/topics/orders/").content.decode()
    assert '<option value="rollback" selected>' in page
    saved = client.post("/topics/orders/", {"retry_count": "3", "retry_strategy": "exponential",
                                            "retry_interval_seconds": "10", "timeout_seconds": "60",
                                            "retention_days": "7", "check_give_up": "commit"})
    assert saved.status_code == 303, saved.content.decode()[:2000]
    orders.refresh_from_db()
    assert orders.check_give_up == "commit"
    assert '<option value="commit" selected>' in client.get("/topics/orders/").content.decode()


def test_a_commit_copies_only_to_the_groups_whose_filter_takes_the_publish_then(
    admin_api: Api, producer_api: Api, orders: Topic,
) -> None:
    answer = prepare(producer_api, {"topic": "orders", "data": 1, "tag": "created"},
                     {"topic": "orders", "data": 2, "tag": "paid"})
    for body in ({"group": "paid", "filter": {"tags": ["paid"]}}, {"group": "all"}):
        assert admin_api.post("/api/v1/topics/orders/groups", body).status_code == 201
    assert admin_api.patch("/api/v1/topics/orders/groups/g1", {"filter": {"tags": ["created"]}}).status_code == 200

    commit(producer_api, answer)
    assert copies() == {"g1": [("1", "NEW")], "all": [("1", "NEW"), ("2", "NEW")], "paid": [("2", "NEW")]}
    assert set(Message.objects.filter(group_name="all").values_list("tag", flat=True)) == {"created", "paid"}
