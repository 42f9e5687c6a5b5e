"""The cleanup job: archive past retention (with trace), Parquet export, purge, registry prune."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from django.test import override_settings
from django.utils import timezone

from messages.archive.models import ArchiveExport, MessageArchive
from messages.archive.selectors import archive_search
from messages.archive.services import (
    archive_export,
    archive_purge,
    maintenance_cleanup,
    messages_archive,
)
from messages.filters import MessageFilter
from messages.models import Message, MessageTrace
from registry.models import ConsumerInstance
from tests.conftest import Api
from tests.support.maintenance import BROKER, age_messages, consume, produce
from topics.models import Biz, Topic

pytestmark = pytest.mark.django_db


@pytest.fixture
def finished_orders(shop: Biz) -> dict[str, list[int]]:
    """orders (shop, 7 days retention): 3 succeeded and 1 dead 8 days ago, 1 NEW for 8 days,
    1 produced just now."""
    Topic.objects.create(name="orders", biz=shop, retention_days=7)
    old = produce("orders", 5)
    done = consume("orders", 3)
    dead = consume("orders", 1, status="FAIL", retry=False)
    age_messages(old, days=8)
    fresh = produce("orders", 1)
    return {"archivable": done + dead, "old_new": [i for i in old if i not in done + dead], "fresh": fresh}


def test_it_moves_finished_messages_past_retention_into_the_archive(finished_orders: dict[str, list[int]]) -> None:
    moved = messages_archive()

    archivable = finished_orders["archivable"]
    assert moved == 4
    assert set(MessageArchive.objects.values_list("id", flat=True)) == set(archivable)
    assert not Message.objects.filter(id__in=archivable).exists()
    # unfinished or recent messages stay in the hot table
    assert Message.objects.filter(id__in=finished_orders["fresh"] + finished_orders["old_new"]).count() == 2
    assert messages_archive() == 0  # idempotent


def test_it_keeps_archived_messages_searchable_with_their_trace(
    finished_orders: dict[str, list[int]], shop_admin_api: Api, outsider_api: Api
) -> None:
    messages_archive()
    dead_id = finished_orders["archivable"][-1]

    response = shop_admin_api.get(f"/api/v1/messages/{dead_id}")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["id"] == dead_id and body["status"] == "FAIL" and body["data"] == {"n": 3}
    events = [e["event"] for e in body["trace"]]
    assert events[0] == "produced" and "pulled" in events and "dead" in events and events[-1] == "archived"
    assert outsider_api.get(f"/api/v1/messages/{dead_id}").status_code in (403, 404)

    page, _ = archive_search(principal=BROKER, filter=MessageFilter(topic="orders", status=("FAIL",)))
    assert [m.id for m in page] == [dead_id]


def test_it_exports_archived_history_to_parquet_partitioned_by_day_and_topic(
    finished_orders: dict[str, list[int]], tmp_path: Path
) -> None:
    messages_archive()
    later = timezone.now() + timedelta(minutes=1)  # past the export's settle time
    with override_settings(MQ_ARCHIVE_PARQUET_DIR=str(tmp_path)):
        result = archive_export(now=later)

    day = timezone.now().date().isoformat()
    files = sorted(p.relative_to(tmp_path).parent.as_posix() for p in tmp_path.rglob("*.parquet"))
    assert files == [f"messages/day={day}/topic=orders", f"traces/day={day}/topic=orders"]
    assert not list(tmp_path.rglob(".*"))  # no temporary files left behind
    assert result["messages"] == 4
    [message_file] = (tmp_path / "messages" / f"day={day}" / "topic=orders").glob("*.parquet")
    table = pq.read_table(message_file)
    assert sorted(table.column("id").to_pylist()) == sorted(finished_orders["archivable"])
    assert set(table.column("status").to_pylist()) == {"SUCCESS", "FAIL"}
    assert "archived_at" in table.column_names and "data" in table.column_names
    # who produced each one: no trace row holds a "produced" event (see Message.producer)
    assert set(table.column("producer").to_pylist()) == {BROKER.name}
    # and when its claim pulled it (by its lease_owner): held by the row as well
    pulled = dict(zip(table.column("id").to_pylist(), table.column("pulled_at").to_pylist(), strict=True))
    assert pulled == dict(MessageArchive.objects.values_list("id", "pulled_at")) and None not in pulled.values()
    # Hive-style partitions: Spark and pyarrow datasets read day and topic as columns.
    traces = ds.dataset(tmp_path / "traces", format="parquet", partitioning="hive").to_table()
    assert set(traces.column("topic").to_pylist()) == {"orders"}
    assert set(traces.column("message_id").to_pylist()) == set(finished_orders["archivable"])
    assert "archived" in traces.column("event").to_pylist()
    # the next run appends only what was archived since: nothing is exported twice
    with override_settings(MQ_ARCHIVE_PARQUET_DIR=str(tmp_path)):
        assert archive_export(now=later + timedelta(minutes=1))["messages"] == 0
    again = ds.dataset(tmp_path / "messages", format="parquet", partitioning="hive").to_table()
    assert again.num_rows == 4
    export = ArchiveExport.objects.get()
    assert (export.messages, export.complete) == (4, False)  # today is not over yet


def test_it_exports_each_archived_row_once_over_several_runs(
    finished_orders: dict[str, list[int]], tmp_path: Path
) -> None:
    messages_archive()
    with override_settings(MQ_ARCHIVE_PARQUET_DIR=str(tmp_path), MQ_ARCHIVE_EXPORT_SETTLE_SECONDS=0):
        archive_export()
        Topic.objects.filter(name="orders").update(retention_days=0)
        consume("orders", 2)
        messages_archive()
        archive_export()

    table = ds.dataset(tmp_path / "messages", format="parquet", partitioning="hive").to_table()
    ids = table.column("id").to_pylist()
    assert len(ids) == len(set(ids)) == 6


def test_it_purges_the_archive_past_its_retention_once_exported(
    finished_orders: dict[str, list[int]], tmp_path: Path
) -> None:
    messages_archive()
    MessageArchive.objects.update(archived_at=timezone.now() - timedelta(days=100))
    archivable = finished_orders["archivable"]
    [fresh] = finished_orders["fresh"]
    MessageTrace.objects.create(message_id=fresh, event="edited", actor="op", at=timezone.now(), status_after="NEW")

    with override_settings(MQ_ARCHIVE_PARQUET_DIR=str(tmp_path), MQ_ARCHIVE_RETENTION_DAYS=90):
        assert archive_purge() == 0  # not exported yet: kept
        archive_export()
        assert archive_purge() == 4

    assert not MessageArchive.objects.exists()
    assert not MessageTrace.objects.filter(message_id__in=archivable).exists()
    assert MessageTrace.objects.filter(message_id__in=finished_orders["fresh"]).exists()


def test_it_prunes_consumers_that_stopped_heartbeating_in_the_cleanup_job(tmp_path: Path) -> None:
    long_ago = timezone.now() - timedelta(hours=2)
    ConsumerInstance.objects.create(consumer="gone", topic="orders", group_name="default", host="h",
                                    started_at=long_ago, last_heartbeat=long_ago)
    ConsumerInstance.objects.create(consumer="alive", topic="orders", group_name="default", host="h",
                                    started_at=timezone.now(), last_heartbeat=timezone.now())

    with override_settings(MQ_ARCHIVE_PARQUET_DIR=str(tmp_path)):
        result = maintenance_cleanup()

    assert result["pruned"]["consumers"] == 1
    assert list(ConsumerInstance.objects.values_list("consumer", flat=True)) == ["alive"]
