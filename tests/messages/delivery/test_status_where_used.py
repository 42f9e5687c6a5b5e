"""On MySQL/MariaDB `ix_msg_key` and `ix_msg_expiry` hold a generated status that is NULL for
a message without a key (without an expiry), so the claim and the ack of a plain message
leave their entries alone (migration 0011). The reads along them, the sharded claim's keys
and the expiry sweep, still take one index range that skips finished rows."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from messages.delivery import sql
from messages.filters import MessageFilter
from messages.models import Message, Status
from mqcenter.core.auth import Principal

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
        cursor.execute("SELECT status, key_status, expiry_status FROM mq_message WHERE id IN "
                       f"({', '.join(['%s'] * len(ids))}) ORDER BY id", ids)
        return list(cursor.fetchall())


def explain(query: str, params: tuple[object, ...] | None = None) -> dict[str, object]:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + query, params)
        columns = [c[0] for c in cursor.description]
        [row] = [dict(zip(columns, r, strict=True)) for r in cursor.fetchall()]
        return row


def plan_of(call):  # type: ignore[no-untyped-def]
    """What `call()` answers and the plan of the one statement it sent, as it was sent."""
    with CaptureQueriesContext(connection) as sent:
        answer = call()
    [statement] = [q["sql"] for q in sent.captured_queries if q["sql"].lstrip().upper().startswith("SELECT")]
    return answer, explain(statement)


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

    counts, plan = plan_of(lambda: sql.per_key("t", "g", ["a", "b", "c"], Status.RUNNING, head=False))
    assert counts == {"a": 2} and len(running) == 2
    assert plan["key"] == "ix_msg_key" and plan["type"] == "range"
    assert int(plan["rows"]) < 100  # the keys' RUNNING entries, not key a's 2,000 finished ones
    heads, plan = plan_of(lambda: sql.per_key("t", "g", ["a", "b", "c"], Status.NEW, head=True))
    assert heads == {"a": waiting[0], "b": waiting[3]}
    assert plan["key"] == "ix_msg_key" and int(plan["rows"]) < 100
    assert sql.per_key("t", "other", ["a"], Status.NEW, head=True) == {}
    assert sql.per_key("t", "g", [], Status.NEW, head=True) == {}


def test_the_expiry_sweep_reads_only_new_messages_whose_expiry_passed_earliest_first() -> None:
    fill(2000, Status.SUCCESS, expires_in=timedelta(hours=-1))  # finished before their expiry passed
    fill(2000, Status.NEW)  # no expiry
    fill(5, Status.NEW, expires_in=timedelta(hours=1))  # not yet
    passed = [fill(1, Status.NEW, expires_in=timedelta(minutes=-minutes))[0] for minutes in (1, 4, 2, 3)]

    ids, plan = plan_of(lambda: sql.expired_ids(timezone.now(), 10))
    assert ids == [passed[1], passed[3], passed[2], passed[0]]  # the earliest expiry first
    assert sql.expired_ids(timezone.now(), 3) == ids[:3]
    assert plan["key"] == "ix_msg_expiry" and plan["type"] == "range"
    assert "filesort" not in str(plan["Extra"]).lower()
    assert int(plan["rows"]) < 100


def test_a_search_by_key_and_status_keeps_the_key_index_whole() -> None:
    fill(2000, Status.SUCCESS, key="a")
    dead = fill(3, Status.FAIL, key="a")
    search = MessageFilter(topic="t", group="g", key="a", status=(Status.FAIL,))
    rows = search.queryset(Principal(name="test", scopes=("admin",), biz_ids=None)).order_by("-id")

    assert list(rows.values_list("id", flat=True)[:10]) == dead[::-1]
    plan = explain(*rows.values("id")[:10].query.sql_with_params())
    # along ix_msg_key's whole prefix (alone or intersected with ix_msg_status), never the
    # key's 2,000 finished rows
    assert "ix_msg_key" in str(plan["key"]).split(",") and int(plan["rows"]) < 100, plan
