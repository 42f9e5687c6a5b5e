"""A publish reads its topic's subscriptions once per `subscriptions_version`: every change of
which groups subscribe, or of their filters, gives the topic a new version under its exclusive
lock, and the next publish, in this process or another, copies by the new subscriptions."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import close_old_connections, connection, transaction
from django.test.utils import CaptureQueriesContext

from messages.models import Message
from messages.routing.filters import subscriptions_locked
from tests.support.api import produce, pull
from topics.locks import lock_topic
from topics.models import Topic

pytestmark = pytest.mark.django_db


def version(topic: str) -> int:
    return Topic.objects.values_list("subscriptions_version", flat=True).get(name=topic)


def copies(data: int) -> list[str]:
    return sorted(Message.objects.filter(topic="orders", data=str(data)).values_list("group_name", flat=True))


def subscriptions_reads(queries: CaptureQueriesContext) -> int:
    """Statements reading the subscribed groups and their filters (`subscriptions_read`)."""
    return sum(q["sql"].startswith("SELECT id, name, filter_spec FROM") for q in queries.captured_queries)


def test_every_change_of_the_subscriptions_moves_the_version_and_the_next_publish_follows(
    shop: Any, admin_api: Any, producer_api: Any, consumer_api: Any,
) -> None:
    Topic.objects.create(name="orders", biz=shop)
    produce(producer_api, {"topic": "orders", "data": 1})
    assert copies(1) == ["default"]  # nobody subscribes yet
    steps = [
        (lambda: pull(consumer_api, "orders", group="billing"), ["billing"]),  # a consumer subscribes
        (lambda: admin_api.post("/api/v1/topics/orders/groups", {"group": "audit"}), ["audit", "billing"]),
        (lambda: admin_api.patch("/api/v1/topics/orders/groups/audit", {"filter": {"tags": ["x"]}}), ["billing"]),
        (lambda: admin_api.patch("/api/v1/topics/orders/groups/audit", {"filter": None}), ["audit", "billing"]),
        (lambda: admin_api.delete("/api/v1/topics/orders/groups/billing"), ["audit"]),
        (lambda: admin_api.patch("/api/v1/topics/orders", {"groups": [{"group": "ship"}]}), ["audit", "ship"]),
    ]
    for data, (change, groups) in enumerate(steps, start=2):
        before = version("orders")
        response = change()
        assert getattr(response, "status_code", 200) < 300, getattr(response, "content", response)
        assert version("orders") != before
        produce(producer_api, {"topic": "orders", "data": data})
        assert copies(data) == groups, data


def test_a_publish_reads_the_subscriptions_only_when_the_version_moved(shop: Any, admin_api: Any, producer_api: Any) -> None:
    Topic.objects.create(name="orders", biz=shop)
    assert admin_api.post("/api/v1/topics/orders/groups", {"group": "a"}).status_code == 201
    produce(producer_api, {"topic": "orders", "data": 1})
    with CaptureQueriesContext(connection) as queries:
        produce(producer_api, {"topic": "orders", "data": 2})
    assert subscriptions_reads(queries) == 0
    assert admin_api.post("/api/v1/topics/orders/groups", {"group": "b"}).status_code == 201
    with CaptureQueriesContext(connection) as queries:
        produce(producer_api, {"topic": "orders", "data": 3})
    assert subscriptions_reads(queries) == 1
    assert copies(2) == ["a"] and copies(3) == ["a", "b"]


def test_a_save_keeps_the_stored_version(shop: Any) -> None:
    topic = Topic.objects.create(name="orders", biz=shop)
    lock_topic(topic.pk, share=False)
    bumped = version("orders")
    assert bumped != topic.subscriptions_version
    topic.description = "saved from an instance read before the change"
    topic.save()
    assert version("orders") == bumped
    assert Topic.objects.get(pk=topic.pk).description.startswith("saved")


def test_the_version_a_rolled_back_change_was_read_at_never_comes_back(
    shop: Any, admin_api: Any, producer_api: Any,
) -> None:
    """A transaction may read the subscriptions after its own change of the version (an
    overflow's first publish locks the topic exclusively, and a batch callback then publishes
    to it) and roll back: the next change must not land on the version that read was kept at."""
    topic = Topic.objects.create(name="orders", biz=shop)
    assert admin_api.post("/api/v1/topics/orders/groups", {"group": "a"}).status_code == 201
    with pytest.raises(RuntimeError), transaction.atomic():
        lock_topic(topic.pk, share=False)
        assert [s.name for s in subscriptions_locked(topic.pk)] == ["a"]
        raise RuntimeError("rolled back")
    assert admin_api.post("/api/v1/topics/orders/groups", {"group": "b"}).status_code == 201
    produce(producer_api, {"topic": "orders", "data": 1})
    assert copies(1) == ["a", "b"]


@pytest.mark.django_db(transaction=True)
def test_a_group_another_connection_subscribes_gets_the_next_publish(
    shop: Any, admin_api: Any, producer_api: Any,
) -> None:
    """The change committed elsewhere (another broker process would do the same): this
    process's last read is at the old version, and the next publish reads again."""
    Topic.objects.create(name="orders", biz=shop)
    assert admin_api.post("/api/v1/topics/orders/groups", {"group": "a"}).status_code == 201
    produce(producer_api, {"topic": "orders", "data": 1})
    answers: list[int] = []

    def elsewhere() -> None:
        try:
            answers.append(admin_api.post("/api/v1/topics/orders/groups", {"group": "b"}).status_code)
        finally:
            close_old_connections()
            connection.close()

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join()
    assert answers == [201]
    produce(producer_api, {"topic": "orders", "data": 2})
    assert copies(1) == ["a"] and copies(2) == ["a", "b"]
