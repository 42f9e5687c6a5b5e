"""On MySQL/MariaDB `ix_msg_key` and `ix_msg_expiry` hold a generated status that is NULL for
a message without a key (without an expiry), so the claim and the ack of a plain message
leave their entries alone (migration 0011). The reads along them, the sharded claim's keys
and the expiry sweep, still take one index range that skips finished rows."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from messages.delivery import sql
from messages.models import Message, Status

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "mysql", reason="the generated columns are MySQL/MariaDB's"),
]


def fill(count: int, status: str, *, key: str | None = None, expires_in: timedelta | None = None) -> list[int]:
    now = timezone.now()
    made = Message.objects.bulk_create([
        Message(topic="t", group_name="g", data="1", status=status, key=key, effect_time=now, add_time=now,
                update_time=now, expires_at=None if expires_in is None else now + expires_in)
        for _ in range(count)
    ])
    return [m.id for m in made]


def generated(ids: list[int]) -> list[tuple[str, str | None, str | None]]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT status, key_status, expiry_status FROM mq_message WHERE id IN ({sql._id_list(ids)}) "
                       "ORDER BY id")
        return list(cursor.fetchall())


def explain(query: str, params: list[object]) -> dict[str, object]:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + query, params)
        columns = [c[0] for c in cursor.description]
        [row] = [dict(zip(columns, r, strict=True)) for r in cursor.fetchall()]
        return row


def test_the_generated_status_follows_the_status_only_for_messages_with_a_key_or_an_expiry() -> None:
    plain = fill(1, Status.NEW)
    keyed = fill(1, Status.NEW, key="k")
    expiring = fill(1, Status.NEW, expires_in=timedelta(hours=1))
    ids = plain + keyed + expiring

    sql.lease(ids, "c1", (None, None), timezone.now() + timedelta(minutes=1), timezone.now())
    assert generated(ids) == [("RUNNING", None, None), ("RUNNING", "RUNNING", None), ("RUNNING", None, "RUNNING")]
    sql.finish(ids, Status.SUCCESS, timezone.now())
    assert generated(ids) == [("SUCCESS", None, None), ("SUCCESS", "SUCCESS", None), ("SUCCESS", None, "SUCCESS")]


def test_a_sharded_claim_reads_each_keys_running_count_and_head_past_its_finished_rows() -> None:
    fill(2000, Status.SUCCESS, key="a")  # the key's history
    fill(2000, Status.SUCCESS)  # messages without a key
    running = fill(2, Status.RUNNING, key="a")
    waiting = fill(3, Status.NEW, key="a") + fill(1, Status.NEW, key="b")

    assert sql.per_key("t", "g", ["a", "b", "c"], Status.RUNNING, head=False) == {"a": 2}
    assert sql.per_key("t", "g", ["a", "b", "c"], Status.NEW, head=True) == {"a": waiting[0], "b": waiting[3]}
    assert sql.per_key("t", "other", ["a"], Status.NEW, head=True) == {}
    assert running
    plan = explain(
        "SELECT msg_key, MIN(id) FROM mq_message FORCE INDEX (ix_msg_key) WHERE msg_key IN (%s, %s) "
        "AND topic = %s AND group_name = %s AND key_status = %s GROUP BY msg_key",
        ["a", "b", "t", "g", Status.NEW],
    )
    assert plan["key"] == "ix_msg_key" and plan["type"] == "range"
    assert int(plan["rows"]) < 100  # the NEW entries of the two keys, not key a's 2,000 finished ones


def test_the_expiry_sweep_reads_only_new_messages_whose_expiry_passed() -> None:
    fill(2000, Status.SUCCESS, expires_in=timedelta(hours=-1))  # finished before their expiry passed
    fill(2000, Status.NEW)  # no expiry
    fill(5, Status.NEW, expires_in=timedelta(hours=1))  # not yet
    passed = fill(4, Status.NEW, expires_in=timedelta(minutes=-1))

    assert sorted(sql.expired_ids(timezone.now(), 10)) == passed
    assert len(sql.expired_ids(timezone.now(), 3)) == 3
    plan = explain(
        "SELECT id FROM mq_message FORCE INDEX (ix_msg_expiry) WHERE expiry_status = %s AND expires_at <= %s "
        "ORDER BY expires_at LIMIT 500",
        [Status.NEW, timezone.now()],
    )
    assert plan["key"] == "ix_msg_expiry" and plan["type"] == "range"
    assert "filesort" not in str(plan["Extra"]).lower()
    assert int(plan["rows"]) < 100
