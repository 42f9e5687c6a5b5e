"""Deleting a topic leaves nothing of it: another business line that creates the same name
afterwards sees none of the old owner's messages, archive, trace or stats."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from django.test import override_settings
from django.utils import timezone

from messages.archive.models import MessageArchive
from messages.archive.services import maintenance_cleanup
from messages.models import Message, MessageTrace
from messages.operations.bulk import bulk_job_run
from messages.operations.models import BulkJob
from messages.operations.purge import PURGE_BATCH
from messages.schedules.models import Schedule
from messages.schedules.services import schedules_tick
from messages.stats.models import StatsBucket
from messages.transactions.models import Transaction
from tests.support.api import ack, produce, pull
from topics.models import Topic


def test_a_deleted_topic_leaves_nothing_visible_to_a_line_that_recreates_its_name(
    shop_admin_api: Any, producer_api: Any, consumer_api: Any, outsider_api: Any, tmp_path: Path
) -> None:
    old = [m["id"] for m in produce(producer_api, *[{"topic": "orders", "data": {"secret": n}} for n in range(3)])]
    delivered = pull(consumer_api, "orders", max_messages=3)
    ack(consumer_api, "c1", {"id": delivered[0]["id"], "status": "SUCCESS"},
        {"id": delivered[1]["id"], "status": "FAIL", "retry": False, "log": "secret reason"},
        {"id": delivered[2]["id"], "status": "SUCCESS"})
    archived = Message.objects.get(id=old[2])
    MessageArchive.objects.create(**{f.attname: getattr(archived, f.attname) for f in Message._meta.concrete_fields},
                                  archived_at=timezone.now())
    archived.delete()
    StatsBucket.objects.create(topic="orders", group_name="default", minute=timezone.now().replace(second=0, microsecond=0), produced=3)
    export = tmp_path / "messages" / "day=2026-11-24" / "topic=orders"
    export.mkdir(parents=True)
    (export / "part-0.parquet").write_bytes(b"old owner's history")

    with override_settings(MQ_ARCHIVE_PARQUET_DIR=str(tmp_path)):
        assert shop_admin_api.delete("/api/v1/topics/orders").status_code == 204

    [new] = produce(outsider_api, {"topic": "orders", "data": {"mine": True}})
    listed = outsider_api.get("/api/v1/messages", {"topic": "orders"}).json()["messages"]
    assert [m["id"] for m in listed] == [new["id"]]
    for message_id in old:
        assert outsider_api.get(f"/api/v1/messages/{message_id}").status_code == 404
    assert [m["id"] for m in pull(outsider_api, "orders", max_messages=10)] == [new["id"]]
    assert not MessageArchive.objects.filter(topic="orders").exists()
    assert not MessageTrace.objects.filter(message_id__in=old).exists()
    assert list(StatsBucket.objects.filter(topic="orders").values_list("produced", flat=True)) == []
    assert not export.exists()


def test_a_topic_with_live_messages_is_not_deleted_and_keeps_them(shop_admin_api: Any, producer_api: Any) -> None:
    [waiting] = produce(producer_api, {"topic": "orders", "data": 1})

    response = shop_admin_api.delete("/api/v1/topics/orders")

    assert response.status_code == 409 and response.json()["error"]["code"] == "conflict"
    assert Message.objects.filter(id=waiting["id"]).exists()


def test_a_deleted_topics_schedules_and_open_transactions_go_with_it(
    shop_admin_api: Any, producer_api: Any, outsider_api: Any
) -> None:
    produce(producer_api, {"topic": "orders", "data": 1, "group": "g"})
    Message.objects.filter(topic="orders").update(status="SUCCESS")
    schedule = shop_admin_api.post("/api/v1/schedules", {
        "name": "nightly", "topic": "orders", "data": {"secret": 1}, "cron": "* * * * *", "timezone": "UTC"})
    assert schedule.status_code == 201, schedule.content
    with override_settings(MQ_TRANSACTION_CHECK_HOSTS=["127.0.0.1:9"]):
        half = producer_api.post("/api/v1/messages", {
            "messages": [{"topic": "orders", "data": "half"}, {"topic": "orders.other", "data": "other half"}],
            "transaction": {"check_url": "http://127.0.0.1:9/check", "check_after_seconds": 30},
        })
    assert half.status_code == 201, half.content
    txn_id = half.json()["transaction_id"]

    assert shop_admin_api.delete("/api/v1/topics/orders").status_code == 204

    assert not Schedule.objects.filter(topic="orders").exists()
    txn = Transaction.objects.get(id=txn_id)
    assert txn.state == Transaction.State.ROLLED_BACK
    assert not Message.objects.filter(id__in=txn.message_ids).exists()  # both halves
    produce(outsider_api, {"topic": "orders", "data": {"mine": True}})
    schedules_tick(now=timezone.now() + timedelta(minutes=5))
    assert list(Message.objects.filter(topic="orders").values_list("data", flat=True)) == ['{"mine":true}']


@override_settings(MQ_TOPIC_PURGE_SETTLE_SECONDS=3600)
def test_a_topic_being_purged_is_gone_for_everyone_and_its_name_is_refused_until_the_purge_ends(
    shop_admin_api: Any, admin_api: Any, producer_api: Any, outsider_api: Any, other_biz: Any
) -> None:
    old = [m["id"] for m in produce(producer_api, *[{"topic": "orders", "data": n, "group": "g"} for n in range(3)])]
    Message.objects.filter(id__in=old).update(status="SUCCESS")

    assert shop_admin_api.delete("/api/v1/topics/orders").status_code == 204

    # The messages are gone; the row waits for every broker's topic cache to forget it.
    assert not Message.objects.filter(id__in=old).exists()
    assert Topic.all_objects.filter(name="orders").exists()
    for api in (shop_admin_api, admin_api):
        assert api.get("/api/v1/topics/orders").status_code == 404
        assert "orders" not in [t["topic"] for t in api.get("/api/v1/topics").json()]
    refused = outsider_api.post("/api/v1/messages", {"messages": [{"topic": "orders", "data": 1}]})
    assert refused.status_code == 409 and "being deleted" in refused.json()["error"]["message"]
    created = admin_api.post("/api/v1/topics", {"topic": "orders", "biz": other_biz.name})
    assert created.status_code == 409 and "being deleted" in created.json()["error"]["message"]

    # A message a broker stored from its cached topic after the delete is swept at the end.
    [late] = Message.objects.bulk_create([Message(
        topic="orders", group_name="g", data='"late"', status="SUCCESS", effect_time=timezone.now(),
        add_time=timezone.now(), update_time=timezone.now())])
    assert admin_api.get(f"/api/v1/messages/{late.id}").status_code == 404
    assert admin_api.get("/api/v1/messages", {"topic": "orders"}).json()["messages"] == []
    job = BulkJob.objects.get(kind=BulkJob.Kind.PURGE)
    with override_settings(MQ_TOPIC_PURGE_SETTLE_SECONDS=0):
        assert maintenance_cleanup()["topic_purges"] == 1
    job.refresh_from_db()
    assert job.state == BulkJob.State.DONE
    assert not Message.objects.filter(topic="orders").exists()
    assert not Topic.all_objects.filter(name="orders").exists()
    assert outsider_api.post("/api/v1/messages", {"messages": [{"topic": "orders", "data": 1}]}).status_code == 201


def test_a_large_topic_is_purged_by_a_job_in_bounded_batches(shop_admin_api: Any, producer_api: Any) -> None:
    now = timezone.now()
    Message.objects.bulk_create([
        Message(topic="orders", group_name="g", data=str(n), status="SUCCESS", effect_time=now, add_time=now,
                update_time=now) for n in range(PURGE_BATCH * 2 + 5)])
    produce(producer_api, {"topic": "orders", "data": 1, "group": "g"})
    Message.objects.filter(topic="orders").update(status="SUCCESS")

    response = shop_admin_api.delete("/api/v1/topics/orders")

    assert response.status_code == 202, response.content
    job_id = response.json()["job"]
    assert response.json()["topic"] == "orders"
    assert Message.objects.filter(topic="orders").count() == PURGE_BATCH * 2 + 6  # nothing yet: the job does it
    assert shop_admin_api.get("/api/v1/topics/orders").status_code == 404
    job = bulk_job_run(job_id=job_id, max_batches=1)
    assert job.processed == PURGE_BATCH and Message.objects.filter(topic="orders").count() == PURGE_BATCH + 6
    bulk_job_run(job_id=job_id)
    body = shop_admin_api.get(f"/api/v1/jobs/{job_id}").json()
    assert body["state"] == "done" and body["processed"] == PURGE_BATCH * 2 + 6, body
    assert not Message.objects.filter(topic="orders").exists()
    assert not Topic.all_objects.filter(name="orders").exists()
