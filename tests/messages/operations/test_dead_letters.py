"""Dead letters grouped by (topic, group, normalised reason), and whole-group actions,
against the real database."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from messages.models import Message, MessageTrace, Status, TraceEvent
from messages.operations.bulk import bulk_job_run
from messages.operations.dead_letter_actions import GROUP_SYNC_LIMIT, dead_letter_group_act
from messages.operations.dead_letters import dead_letter_groups, dead_letter_reason_normalise
from messages.operations.models import BulkJob
from mqcenter.core.auth import Principal
from tests.support.console import add_message
from topics.models import Topic

ROOT = Principal(name="user:root", scopes=("admin",), biz_ids=None)


def dead_rows(topic: str, n: int, *, group: str = "billing", log: str = "bad payload for item {i}",
              status: str = Status.FAIL) -> list[int]:
    now = timezone.now()
    Message.objects.bulk_create([
        Message(topic=topic, group_name=group, data=json.dumps({"item": i}), status=status, effect_time=now,
                attempt=1, last_log=log.format(i=i), add_time=now, update_time=now + timedelta(milliseconds=i))
        for i in range(n)
    ], batch_size=1000)
    return list(Message.objects.filter(topic=topic, group_name=group).values_list("id", flat=True))


@pytest.mark.parametrize(("log", "reason"), [
    ("bad payload for item 17", "bad payload for item <n>"),
    ("ValueError: sku 'AB-12' unknown\n  File x.py, line 3", "ValueError: sku <v> unknown"),
    ('no route to "10.0.0.7"', "no route to <v>"),
    ("order 5f3a9c0e-1b2c-4d5e-8f90-123456789abc failed", "order <id> failed"),
    ("blob deadbeef0123456789 missing", "blob <id> missing"),
    ("\n\n  timeout at 2026-11-25T03:00:01.5+00:00", "timeout at <time>"),
    ("", "(no log)"),
])
def test_it_normalises_a_reason(log: str, reason: str) -> None:
    assert dead_letter_reason_normalise(log=log) == reason


def test_it_groups_2000_similar_failures_as_one_row_sorted_by_size(db: Any, orders: Topic) -> None:
    dead_rows("orders", 2000)
    dead_rows("orders", 12, group="mail", log="smtp said {i}")
    for i in range(3):
        add_message("orders", Status.FAIL, log=f"ValueError: sku 'X{i}' unknown")
    groups, truncated = dead_letter_groups(principal=ROOT)
    assert not truncated
    assert [(g["group"], g["reason"], g["count"]) for g in groups] == [
        ("billing", "bad payload for item <n>", 2000),
        ("mail", "smtp said <n>", 12),
        ("billing", "ValueError: sku <v> unknown", 3),
    ]
    big = groups[0]
    assert big["first_seen"] < big["last_seen"]
    assert Message.objects.get(id=big["sample_id"]).last_log == big["sample_log"] == "bad payload for item 1999"


def test_it_takes_a_timeout_reason_from_the_trace(db: Any, orders: Topic) -> None:
    message = add_message("orders", Status.TIMEOUT)
    MessageTrace.objects.create(message_id=message.id, event=TraceEvent.LEASE_EXPIRED, actor="broker",
                                at=timezone.now(), attempt=1, status_after=Status.TIMEOUT,
                                log="lease of host-a:41:c expired; no retries left")
    groups, _ = dead_letter_groups(principal=ROOT)
    assert [(g["reason"], g["statuses"]) for g in groups] == [
        ("lease of host-a:<n>:c expired; no retries left", ["TIMEOUT"])]


def test_it_says_when_the_bound_is_reached(db: Any, orders: Topic) -> None:
    dead_rows("orders", 30)
    groups, truncated = dead_letter_groups(principal=ROOT, bound=20)
    assert truncated and groups[0]["count"] == 20


def test_it_redrives_a_small_group_at_once_and_leaves_other_groups(db: Any, orders: Topic) -> None:
    ids = dead_rows("orders", 5)
    other = add_message("orders", Status.FAIL, log="something else")
    result = dead_letter_group_act(principal=ROOT, action="redrive", topic="orders", group="billing",
                                   reason="bad payload for item <n>")
    assert result == {"count": 5}
    assert set(Message.objects.filter(id__in=ids).values_list("status", flat=True)) == {Status.NEW}
    assert Message.objects.get(id=other.id).status == Status.FAIL


def test_it_runs_a_large_group_as_a_job_with_progress(db: Any, orders: Topic) -> None:
    ids = dead_rows("orders", GROUP_SYNC_LIMIT + 700)
    keep = dead_rows("orders", 3, group="mail", log="bad payload for item {i}")
    result = dead_letter_group_act(principal=ROOT, action="delete", topic="orders", group="billing",
                                   reason="bad payload for item <n>")
    job = bulk_job_run(job_id=result["job"], max_batches=1)
    assert job.state == BulkJob.State.RUNNING and job.total == len(ids) and 0 < job.processed < job.total
    job = bulk_job_run(job_id=job.id)
    assert job.state == BulkJob.State.DONE and job.processed == len(ids)
    assert not Message.objects.filter(id__in=ids).exists()
    assert Message.objects.filter(id__in=keep).count() == 3


def test_it_exports_a_group_as_json_lines(db: Any, orders: Topic, clients: dict[str, Any]) -> None:
    dead_rows("orders", 1500)
    add_message("orders", Status.FAIL, log="something else")
    response = clients["viewer"].get("/dead/group/export/", {"topic": "orders", "group": "billing",
                                                             "reason": "bad payload for item <n>"})
    lines = b"".join(response.streaming_content).decode().splitlines()
    records = [json.loads(line) for line in lines]
    assert len(records) == 1500 and len({r["id"] for r in records}) == 1500
    assert all(r["last_log"].startswith("bad payload for item ") for r in records)


def test_it_refuses_a_group_action_without_a_reason(db: Any, orders: Topic, clients: dict[str, Any]) -> None:
    response = clients["operator"].post("/dead/group/redrive/", {"topic": "orders", "group": "billing"})
    assert response.status_code == 400


def test_it_shows_one_row_per_group_on_the_page(db: Any, orders: Topic, clients: dict[str, Any]) -> None:
    dead_rows("orders", 40, log="<script>alert('x')</script> item {i}")
    body = clients["viewer"].get("/dead/").content.decode()
    assert body.count('class="dead-group"') == 1
    assert "<script>alert" not in body and "&lt;script&gt;" in body
