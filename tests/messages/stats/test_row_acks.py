"""Successes the flush counts from the message rows (messages/stats/row_acks.py): a first
delivery's success writes no trace row, and every success still counts exactly once."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from messages.archive.models import MessageArchive
from messages.archive.services import messages_archive
from messages.delivery.acks import AckResult, acks_carried, messages_ack
from messages.delivery.claims import messages_claim
from messages.delivery.lifecycle import leases_recover
from messages.maintenance.models import MaintenanceRun
from messages.models import Message, MessageTrace, Status
from messages.operations.bulk import messages_requeue
from messages.selectors import message_trace
from messages.services import message_edit
from messages.stats.flush import stats_flush
from messages.stats.models import StatsBucket
from messages.stats.row_acks import held_acks_after
from tests.support.maintenance import BROKER, age_messages, consume, produce, settle_trace
from topics.models import Topic

pytestmark = pytest.mark.django_db


def succeeded(topic: str = "orders") -> int:
    return sum(StatsBucket.objects.filter(topic=topic).values_list("succeeded", flat=True))


def claim(count: int, consumer: str = "c1") -> list[Message]:
    claimed, _ = messages_claim(principal=BROKER, topic="orders", group="default", consumer=consumer,
                                max_messages=count)
    return claimed


@pytest.fixture
def orders() -> Topic:
    return Topic.objects.create(name="orders", retry_count=2, retry_interval_seconds=0)


def test_first_delivery_successes_count_from_their_rows_once_over_several_flushes(orders) -> None:
    ids = produce("orders", 6)
    consume("orders", 3)  # the ack door, row by row
    held = claim(3)
    with_log = AckResult(id=held[2].id, status="SUCCESS", log="done")
    with transaction.atomic():  # a pull's carried acks: the clean batch UPDATE
        acks_carried(principal=BROKER, topic="orders", group="default", consumer="c1", now=timezone.now(),
                     results=[AckResult(id=m.id, status="SUCCESS") for m in held[:2]] + [with_log])
    assert not MessageTrace.objects.filter(message_id__in=ids[:5], event="acked").exists()
    assert list(MessageTrace.objects.filter(event="acked").values_list("message_id", "log")) == [(ids[5], "done")]
    settle_trace()

    stats_flush()
    stats_flush()

    assert succeeded() == 6
    run = MaintenanceRun.objects.get(job="flush")
    last = Message.objects.filter(id__in=ids[:5]).order_by("update_time", "id").last()
    assert (run.acked_time, run.acked_id) == (last.update_time, last.id)
    produce("orders", 2)
    consume("orders", 2)
    settle_trace()
    stats_flush()
    assert succeeded() == 8


def test_a_later_attempt_counts_from_its_trace_row_and_not_from_its_row(orders) -> None:
    ids = produce("orders", 2)
    first = claim(2)
    Message.objects.filter(id=ids[0]).update(lease_expires_at=first[0].pulled_at)  # already expired
    assert leases_recover() == 1
    Message.objects.filter(id=ids[0]).update(effect_time=first[0].pulled_at)
    again = claim(1, consumer="c2")
    assert [m.id for m in again] == [ids[0]]
    messages_ack(principal=BROKER, consumer="c2", results=[AckResult(id=ids[0], status="SUCCESS")])
    messages_ack(principal=BROKER, consumer="c1", results=[AckResult(id=ids[1], status="SUCCESS")])
    assert list(MessageTrace.objects.filter(event="acked").values_list("message_id", "attempt")) == [(ids[0], 2)]
    settle_trace()

    stats_flush()
    stats_flush()

    assert succeeded() == 2


def test_batch_members_count_once(orders) -> None:
    ids = produce("orders", 3)
    Message.objects.filter(id__in=ids).update(batch_id="b-1")  # members take the row-by-row path
    held = claim(3)
    with transaction.atomic():
        acks_carried(principal=BROKER, topic="orders", group="default", consumer="c1", now=timezone.now(),
                     results=[AckResult(id=m.id, status="SUCCESS") for m in held])
    assert set(Message.objects.filter(id__in=ids).values_list("status", flat=True)) == {"SUCCESS"}
    assert not MessageTrace.objects.filter(message_id__in=ids, event="acked").exists()
    settle_trace()

    stats_flush()

    assert succeeded() == 3


def test_a_success_archived_before_the_flush_still_counts_once(orders) -> None:
    Topic.objects.filter(name="orders").update(retention_days=1)
    ids = produce("orders", 3)
    consume("orders", 3)
    age_messages(ids[:2], days=2)
    Message.objects.filter(id__in=ids[:2]).update(pulled_at=Message.objects.get(id=ids[0]).add_time)
    assert messages_archive() == 2
    assert set(MessageArchive.objects.values_list("id", flat=True)) == set(ids[:2])
    settle_trace()

    stats_flush()
    stats_flush()

    assert succeeded() == 3
    archived = MessageArchive.objects.get(id=ids[0])
    assert [(e.event, e.actor, e.attempt) for e in message_trace(archived)] == [
        ("produced", archived.producer, 0), ("pulled", "c1", 1), ("acked", "c1", 1), ("archived", "maintenance", 1)]


@pytest.mark.parametrize("flushed_first", [False, True])
def test_a_requeued_or_edited_success_keeps_its_ack_and_counts_once(orders, flushed_first: bool) -> None:
    ids = produce("orders", 2)
    consume("orders", 2)
    settle_trace()
    rows = {m.id: m for m in Message.objects.filter(id__in=ids)}
    if flushed_first:
        stats_flush()
    messages_requeue(principal=BROKER, ids=[ids[0]], dead_only=False)
    message_edit(principal=BROKER, message_id=ids[1], changes={"retry_remaining": 5})  # stays SUCCESS
    written = list(MessageTrace.objects.filter(event__in=["pulled", "acked"]).order_by("message_id", "id")
                   .values_list("message_id", "event", "actor", "attempt", "at"))
    assert written == [(i, e, "c1", 1, getattr(rows[i], f)) for i in ids
                       for e, f in (("pulled", "pulled_at"), ("acked", "update_time"))]
    assert not Message.objects.filter(id__in=ids, pulled_at__isnull=False).exists()
    for i in ids:  # shown once, from the trace row now
        assert [e.event for e in message_trace(Message.objects.get(id=i))].count("acked") == 1
    settle_trace()

    stats_flush()
    stats_flush()

    assert succeeded() == 2
    consume("orders", 1)  # the requeued one again: attempt 2, its own trace row
    settle_trace()
    stats_flush()
    assert succeeded() == 3


def test_a_batch_acked_in_one_microsecond_is_counted_across_small_flush_batches(orders) -> None:
    ids = produce("orders", 6)
    held = claim(5)
    with transaction.atomic():  # one carried batch: five rows with one update_time
        acks_carried(principal=BROKER, topic="orders", group="default", consumer="c1", now=timezone.now(),
                     results=[AckResult(id=m.id, status="SUCCESS") for m in held])
    settle_trace()
    consume("orders", 1)  # younger than the settle time: left for a later flush

    stats_flush(batch=2)

    assert succeeded() == 5
    assert MaintenanceRun.objects.get(job="flush").acked_id == max(ids[:5])
    settle_trace()
    stats_flush(batch=2)
    assert succeeded() == 6


@pytest.mark.django_db(transaction=True)
def test_flushes_of_several_processes_at_once_count_each_success_once() -> None:
    import threading

    Topic.objects.create(name="orders", retry_count=0)
    produce("orders", 40)
    for _ in range(4):
        consume("orders", 10)
    settle_trace()
    errors: list[BaseException] = []

    def flush() -> None:
        try:
            stats_flush(batch=3)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=flush) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert succeeded() == 40


@pytest.mark.skipif(connection.vendor != "mysql", reason="MySQL/MariaDB's plans")
def test_the_flush_reads_held_acks_along_the_finished_index_from_its_watermark() -> None:
    now = timezone.now()
    rows = [Message(topic="busy", group_name="default", data="1", status=status, attempt=1, effect_time=now,
                    add_time=now, update_time=now - timedelta(seconds=n), pulled_at=now, lease_owner="c1")
            for n in range(3000) for status in (Status.SUCCESS, Status.NEW) if n % 3 or status == Status.SUCCESS]
    Message.objects.bulk_create(rows, batch_size=1000)
    state = MaintenanceRun(job="flush", acked_time=now - timedelta(seconds=100), acked_id=0)
    sql, params = held_acks_after(Message, state, now)[:100].query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
        columns = [c[0] for c in cursor.description]
        [plan] = [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
    assert plan["key"] == "ix_msg_finished" and plan["type"] == "range", plan
    assert "filesort" not in str(plan["Extra"]).lower()
    assert int(plan["rows"]) < 500  # the last 100 seconds of successes, not the other 2,900


def test_an_ack_written_before_rows_held_acks_shows_and_counts_once(orders) -> None:
    ids = produce("orders", 2)
    consume("orders", 2)
    settle_trace()
    rows = {m.id: m for m in Message.objects.filter(id__in=ids)}
    for row in rows.values():  # as an ack wrote it before: its trace row, and the row as it is
        MessageTrace.objects.create(message_id=row.id, event="acked", actor="c1", at=row.update_time, attempt=1,
                                    status_after="SUCCESS")
    # what the migration sets: the floor of such rows, and the rows' watermark from then on
    MaintenanceRun.objects.update_or_create(job="flush", defaults={
        "acked_time": timezone.now(), "acked_trace_floor": MessageTrace.objects.order_by("-id").first().id})
    for row in rows.values():
        assert [e.event for e in message_trace(row)] == ["produced", "pulled", "acked"]

    stats_flush()
    messages_requeue(principal=BROKER, ids=[ids[0]], dead_only=False)  # writes out the pull only
    settle_trace()
    stats_flush()

    assert succeeded() == 2
    assert list(MessageTrace.objects.filter(message_id=ids[0]).order_by("id").values_list("event", flat=True)) == [
        "acked", "pulled", "redriven"]
    assert [e.event for e in message_trace(Message.objects.get(id=ids[0]))].count("acked") == 1
