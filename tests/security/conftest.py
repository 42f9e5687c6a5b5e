"""Shop's world for the security tests: its data, and how to call every route on it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from messages.batches.models import Batch
from messages.models import Message
from messages.operations.models import BulkJob
from messages.schedules.models import Schedule
from messages.transactions.models import Transaction
from registry.services import broker_heartbeat
from tests.conftest import Api, make_api
from tests.support.api import produce, pull
from tests.support.archive import archive_messages
from topics.models import Biz

# Strings only the shop's data contains: none may reach another business line's token.
MARKERS = ("SHOPSECRET", "SHOPKEY", "SHOPTITLE", "SHOPOWNER", "shophost")


@dataclass(frozen=True)
class Sample:
    """How to call one (route, method) meaningfully, and who may.

    needs: "admin", "produce", "consume", "topic" (any scope on the topic), "any" (every
    valid token: broker discovery). filtered: the answer is a list cut down to what the
    caller may see (2xx allowed for outsiders, but without a trace of shop data).
    """

    needs: str = "admin"
    body: Any = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    filtered: bool = False


def samples(world: dict[str, Any]) -> dict[tuple[str, str], Sample]:
    running, dead = world["running"], world["dead"]
    return {
        ("api:archive-messages", "GET"): Sample("admin", params={"topic": "orders"}, filtered=True),
        ("api:archive-message", "GET"): Sample("admin"),
        ("api:archive-redrive", "POST"): Sample("admin", {"ids": [world.get("archived", 3)]}, filtered=True),
        ("api:messages-move", "POST"): Sample("admin", {"ids": [dead], "to_topic": "orders", "to_group": "parked"}),
        ("api:messages", "POST"): Sample("produce", {"messages": [{"topic": "orders", "data": 1}]}),
        ("api:messages", "GET"): Sample("admin", params={"topic": "orders"}, filtered=True),
        ("api:messages-redrive", "POST"): Sample("admin", {"ids": [dead]}, filtered=True),
        ("api:messages-requeue", "POST"): Sample("admin", {"ids": [dead]}, filtered=True),
        ("api:messages-delete", "POST"): Sample("admin", {"ids": [dead]}, filtered=True),
        ("api:message-detail", "GET"): Sample("admin"),
        ("api:message-detail", "PATCH"): Sample("admin", {"data": {"edited": True}}),
        ("api:message-detail", "DELETE"): Sample("admin"),
        ("api:job-detail", "GET"): Sample("admin"),
        ("api:messages-cancel", "POST"): Sample("admin", {"ids": [dead]}, filtered=True),
        ("api:message-cancel", "POST"): Sample("admin"),
        ("api:transaction", "GET"): Sample("produce"),
        ("api:transaction-commit", "POST"): Sample("produce"),
        ("api:transaction-rollback", "POST"): Sample("produce"),
        ("api:batches", "POST"): Sample("produce", {"callback_topic": "orders", "messages": [{"topic": "orders", "data": 1}]}),
        ("api:batch", "GET"): Sample("produce"),
        ("api:schedules", "GET"): Sample("admin", filtered=True),
        ("api:schedules", "POST"): Sample("admin", {"name": "probe", "topic": "orders", "cron": "* * * * *"}),
        ("api:schedule", "GET"): Sample("admin"),
        ("api:schedule", "PATCH"): Sample("admin", {"enabled": False}),
        ("api:schedule", "DELETE"): Sample("admin"),
        ("api:schedule-run", "POST"): Sample("admin"),
        ("api:pull", "POST"): Sample("consume", {"topic": "orders", "consumer": "probe"}, filtered=True),
        ("api:ack", "POST"): Sample("consume", {"consumer": "shophost:1:c1", "results": [{"id": running, "status": "SUCCESS"}]}, filtered=True),
        ("api:extend", "POST"): Sample("consume", {"consumer": "shophost:1:c1", "ids": [running], "seconds": 30}, filtered=True),
        ("api:release", "POST"): Sample("consume", {"consumer": "shophost:1:c1", "ids": [running]}, filtered=True),
        ("api:stats", "GET"): Sample("admin", filtered=True),
        ("api:biz-list", "GET"): Sample("admin", filtered=True),
        ("api:biz-list", "POST"): Sample("admin", {"name": "newbiz"}),
        ("api:biz-detail", "GET"): Sample("admin"),
        ("api:biz-detail", "PATCH"): Sample("admin", {"title": "changed"}),
        ("api:biz-detail", "DELETE"): Sample("admin"),
        ("api:topic-list", "GET"): Sample("admin", filtered=True),
        ("api:topic-list", "POST"): Sample("admin", {"topic": "orders.new", "biz": "shop"}),
        ("api:topic-detail", "GET"): Sample("topic"),
        ("api:topic-detail", "PATCH"): Sample("admin", {"paused": True}),
        ("api:topic-detail", "DELETE"): Sample("admin"),
        ("api:group-list", "GET"): Sample("topic"),
        ("api:group-list", "POST"): Sample("admin", {"group": "probe", "start": "earliest"}),
        ("api:group-detail", "GET"): Sample("topic"),
        ("api:group-detail", "PATCH"): Sample("admin", {"paused": True}),
        ("api:group-detail", "DELETE"): Sample("admin"),
        ("api:group-replay", "POST"): Sample("admin", {"since": "2020-01-01T00:00:00Z"}),
        ("api:registry-consumers", "POST"): Sample("consume", {"consumer": "probe", "subscriptions": [{"topic": "orders"}]}),
        ("api:registry-consumers", "GET"): Sample("any", params={"topic": "orders"}, filtered=True),
        # Another line's pull, ack, extend, release and leave answer as for a missing topic or
        # message (nothing claimed, stale), changing nothing of shop's.
        ("api:registry-consumer", "DELETE"): Sample("consume", filtered=True),
        ("api:registry-brokers", "GET"): Sample("any"),
    }


@pytest.fixture
def world(admin_api: Api, shop: Biz, other_biz: Biz) -> dict[str, Any]:
    """Shop's data: a topic, a message held by a consumer, a dead letter, a job, a broker."""
    shop.title = "SHOPTITLE"
    shop.save()
    assert admin_api.post("/api/v1/topics", {"topic": "orders", "biz": "shop", "owner": "SHOPOWNER"}).status_code == 201
    shop_producer = make_api(["produce:orders*"], shop)
    shop_consumer = make_api(["consume:orders*"], shop)
    # Archived first: the archive job's scan stops at the first message added after its cutoff.
    (archived,) = (e["id"] for e in produce(shop_producer, {"topic": "orders", "data": {"secret": "SHOPSECRET"},
                                                          "key": "SHOPKEY", "group": "default"}))
    Message.objects.filter(id=archived).update(status="SUCCESS")
    hb = shop_consumer.post("/api/v1/registry/consumers", {"consumer": "shophost:1:c1", "subscriptions": [{"topic": "orders"}]})
    assert hb.status_code == 200
    running, dead = (e["id"] for e in produce(
        shop_producer,
        {"topic": "orders", "data": {"secret": "SHOPSECRET"}, "key": "SHOPKEY"},
        {"topic": "orders", "data": {"secret": "SHOPSECRET"}, "key": "SHOPKEY"},
    ))
    pulled = pull(shop_consumer, "orders", consumer="shophost:1:c1", max_messages=2)
    assert {m["id"] for m in pulled} == {running, dead}
    Message.objects.filter(id=dead).update(status="FAIL", lease_owner=None, lease_expires_at=None)
    Message.objects.filter(id=running).update(lease_expires_at=timezone.now() + timedelta(hours=1))
    job = BulkJob.objects.create(kind="delete", filter={"topic": "orders"}, actor="test", biz_ids=[shop.id])
    broker_heartbeat(node_id="n1", url="http://10.0.0.5:8000", host="h", pid=1)
    now = timezone.now()
    txn = Transaction.objects.create(biz_id=shop.id, producer="SHOPOWNER", topics=["orders"], message_ids=[],
                                     check_url="http://shophost/check", check_after_seconds=30,
                                     next_check_at=now + timedelta(hours=1), created_at=now)
    schedule = Schedule.objects.create(name="SHOPSECRET-nightly", biz=shop, topic="orders", cron="0 2 * * *",
                                       data='{"secret":"SHOPSECRET"}', next_run_at=now + timedelta(hours=1))
    archive_messages([archived])
    Batch.objects.create(id="shop-batch", biz_id=shop.id, producer="SHOPOWNER", callback_topic="orders", created_at=now)
    return {
        "running": running, "dead": dead, "archived": archived,
        "path": {"message_id": str(running), "archived_id": str(archived), "job_id": str(job.id), "biz_id": str(shop.id),
                 "topic": "orders", "group": "default", "consumer": "shophost:1:c1", "transaction_id": txn.id,
                 "schedule_id": str(schedule.id), "batch_id": "shop-batch"},
        "shop": shop,
    }


