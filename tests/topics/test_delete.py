"""Deleting a topic leaves nothing of it: another business line that creates the same name
afterwards sees none of the old owner's messages, archive, trace or stats."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.test import override_settings
from django.utils import timezone

from messages.models import Message, MessageArchive, MessageTrace, StatsBucket
from tests.support.api import ack, produce, pull


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
