"""The claim path's query plans: an index range in claim order, whatever the table holds."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from messages.models import Message, Status

pytestmark = pytest.mark.django_db


def fill(
    count: int, status: str, *, topic: str = "busy", delay: timedelta = timedelta(0), priorities: int = 1
) -> None:
    """`count` rows; with `priorities` > 1, priorities cycle through 0 .. priorities-1."""
    now = timezone.now()
    Message.objects.bulk_create(
        [
            Message(topic=topic, group_name="default", data="1", status=status, effect_time=now + delay,
                    add_time=now, update_time=now, priority=n % priorities if priorities > 1 else 4)
            for n in range(count)
        ],
        batch_size=1000,
    )


def explain(sql: str, params: list[object]) -> list[dict[str, object]]:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
        columns = [c[0] for c in cursor.description]
        return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def test_it_reads_a_group_in_time_order_whatever_the_priorities() -> None:
    """The sharded claim's candidates, the next delayed message and the scheduled list read
    one range of ix_msg_priority per level and merge them in (effect_time, id) order."""
    now = timezone.now()
    Message.objects.bulk_create([
        Message(topic="busy", group_name="default", data="1", status=Status.NEW, add_time=now, update_time=now,
                effect_time=now - timedelta(seconds=n % 7), priority=(n * 3) % 10)
        for n in range(60)
    ] + [
        Message(topic="busy", group_name="default", data="1", status=Status.NEW, add_time=now, update_time=now,
                effect_time=now + timedelta(minutes=n % 5 + 1), priority=9 - n % 10)
        for n in range(30)
    ])
    fill(100, Status.SUCCESS, priorities=10)
    from messages.delivery import sql

    due = Message.objects.filter(status=Status.NEW, effect_time__lte=now)
    in_order = list(due.order_by("effect_time", "id").values_list("id", flat=True))
    assert [m.id for m in sql.due_in_time_order("busy", "default", now, 25)] == in_order[:25]
    assert [m.id for m in sql.due_in_time_order("busy", "default", now, 100)] == in_order
    later = Message.objects.filter(status=Status.NEW, effect_time__gt=now)
    assert sql.next_due("busy", "default", now) == later.order_by("effect_time").first().effect_time
    assert sql.next_due("busy", "default", now + timedelta(hours=1)) is None
    assert sql.next_due("other", "default", now) is None
    first = sql.in_time_order(later.values("id", "effect_time"), 7)
    assert [r["id"] for r in first] == list(later.order_by("effect_time", "id").values_list("id", flat=True)[:7])
    assert sql.in_time_order(later.none().values("id", "effect_time"), 7) == []  # a topic being deleted


@pytest.mark.skipif(connection.vendor != "mysql", reason="FORCE INDEX plans are MySQL/MariaDB's")
def test_a_time_order_read_is_one_short_range_per_priority_level() -> None:
    fill(3000, Status.SUCCESS, priorities=10)  # finished history
    fill(500, Status.NEW, delay=timedelta(hours=1), priorities=10)  # delayed
    fill(50, Status.NEW, priorities=10)  # deliverable
    fill(2000, Status.NEW, topic="other", priorities=10)
    from messages.delivery import sql

    for read in (lambda: sql.due_in_time_order("busy", "default", timezone.now(), 20),
                 lambda: sql.next_due("busy", "default", timezone.now())):
        with CaptureQueriesContext(connection) as queries:
            read()
        [statement] = [q["sql"] for q in queries.captured_queries]
        parts = [row for row in explain(statement, []) if row["table"] == "mq_message"]
        assert len(parts) == 10
        for part in parts:
            assert part["key"] == "ix_msg_priority" and part["type"] == "range"
            # Each level's range is its due (or delayed) rows only, read in index order.
            assert "filesort" not in str(part["Extra"]).lower()
            assert int(part["rows"]) <= 120


@pytest.mark.skipif(connection.vendor != "mysql", reason="FORCE INDEX plans are MySQL/MariaDB's")
def test_it_claims_by_priority_along_its_index_without_sorting_or_reading_finished_rows() -> None:
    fill(3000, Status.SUCCESS, priorities=10)  # finished history, every priority
    fill(3000, Status.FAIL, priorities=10)
    fill(100, Status.NEW, delay=timedelta(hours=1), priorities=10)  # delayed
    fill(60, Status.NEW, priorities=10)  # deliverable
    fill(2000, Status.NEW, topic="other", priorities=10)
    from messages.delivery import sql

    plan = explain(
        sql.claim_select(lock=True), ["busy", "default", Status.NEW, timezone.now(), 100]
    )
    assert len(plan) == 1
    assert plan[0]["key"] == "ix_msg_priority"
    assert plan[0]["type"] in ("range", "ref")
    # The index gives the order: no filesort, and the effect_time test is made on the index
    # entries, so delayed rows are skipped without reading them.
    assert "filesort" not in str(plan[0]["Extra"]).lower()
    assert "Using index condition" in str(plan[0]["Extra"])
    # The range is the group's NEW rows (deliverable and delayed), never its 6,000 finished ones.
    assert int(plan[0]["rows"]) <= 400
    rows = sql.claimable_rows("busy", "default", timezone.now(), 100, lock=False)
    assert len(rows) == 60
    in_claim_order = sorted(rows, key=lambda m: (-m.priority, m.effect_time, m.id))
    assert [m.id for m in rows] == [m.id for m in in_claim_order]
    assert (rows[0].priority, rows[-1].priority) == (9, 0)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL plans")
def test_on_postgresql_a_claim_reads_its_rows_along_the_index_without_sorting_the_backlog() -> None:
    """PostgreSQL does not hold the primary key in an index entry: the claim's index names
    `id` last, or every claim sorts every due row of its group."""
    fill(3000, Status.NEW, priorities=10)
    from messages.delivery import sql

    with CaptureQueriesContext(connection) as queries, transaction.atomic():
        claimed = sql.claimable_rows("busy", "default", timezone.now(), 100, lock=True)
    assert len(claimed) == 100
    [claim] = [q["sql"] for q in queries.captured_queries if "FOR UPDATE" in q["sql"]]
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE mq_message")  # as autovacuum would: without it the plan is a coin toss
        cursor.execute("EXPLAIN " + claim)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Index Scan using ix_msg_priority" in plan and "Sort" not in plan, plan


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL indexes")
def test_on_postgresql_the_indexes_read_in_id_order_end_with_it() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'mq_message'"
                       " AND indexname IN ('ix_msg_priority', 'ix_msg_fair', 'ix_msg_finished')")
        definitions = dict(cursor.fetchall())
    assert len(definitions) == 3
    assert all(d.endswith(", id)") for d in definitions.values()), definitions


@pytest.mark.skipif(connection.vendor != "mysql", reason="MySQL/MariaDB plans")
def test_it_finds_the_head_of_a_serial_group_with_one_index_probe() -> None:
    fill(3000, Status.SUCCESS)
    fill(200, Status.NEW)
    from messages.delivery import sql

    plan = explain(
        "SELECT id FROM mq_message FORCE INDEX (ix_msg_order) WHERE topic = %s AND group_name = %s "
        "AND status = %s ORDER BY id LIMIT 1",
        ["busy", "default", Status.NEW],
    )
    assert plan[0]["key"] == "ix_msg_order"
    assert "filesort" not in str(plan[0]["Extra"]).lower()
    head = sql.group_head("busy", "default", Status.NEW)
    assert head is not None
    assert head.id == Message.objects.filter(status=Status.NEW).order_by("id").first().id


def test_it_finds_the_first_message_added_since_a_moment_by_binary_search() -> None:
    from messages.delivery import sql

    start = timezone.now() - timedelta(days=10)
    Message.objects.bulk_create([
        Message(topic="old", group_name="default", data="1", status=Status.SUCCESS,
                effect_time=start, add_time=start + timedelta(hours=n), update_time=start + timedelta(hours=n))
        for n in range(100)
    ])
    ids = list(Message.objects.order_by("id").values_list("id", flat=True))

    # An id bound: above the last older row, at most the first newer one (Galera leaves gaps
    # between ids: auto_increment_increment is the cluster's size).
    bound = sql.first_id_added_since(start + timedelta(hours=37, minutes=30))
    assert bound is not None and ids[37] < bound <= ids[38]
    assert sql.first_id_added_since(start - timedelta(days=1)) == ids[0]
    assert sql.first_id_added_since(start + timedelta(days=30)) is None
