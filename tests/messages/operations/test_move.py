"""Moving messages to another topic and group (a shovel): waiting and dead ones move,
running ones are skipped and reported, both traces record it, rights on both topics."""

from __future__ import annotations

import pytest
from django.test import override_settings

from messages.models import Message, MessageTrace
from messages.operations.bulk import bulk_job_run
from messages.operations.models import BulkJob
from tests.conftest import make_api
from tests.support.api import ack, expect_error, produce, pull

pytestmark = pytest.mark.django_db


@pytest.fixture
def topics(admin_api, shop, other_biz):
    for topic, biz in (("orders", "shop"), ("orders.parking", "shop"), ("ledger", "other")):
        response = admin_api.post("/api/v1/topics", {"topic": topic, "biz": biz, "retry_count": 1})
        assert response.status_code == 201, response.content


@pytest.fixture
def three(producer_api, consumer_api, topics):
    """orders/default: one running (pulled by c1), one dead (FAIL), one waiting (NEW)."""
    items = [
        {"topic": "orders", "group": "default", "data": {"n": n}, "key": f"k{n}", "retry_count": 0}
        for n in range(3)
    ]
    running, dead, waiting = (e["id"] for e in produce(producer_api, *items))
    assert [m["id"] for m in pull(consumer_api, "orders", max_messages=2)] == [running, dead]
    ack(consumer_api, "c1", {"id": dead, "status": "FAIL", "log": "bad sku"})
    return {"running": running, "dead": dead, "waiting": waiting}


def snapshot():
    return list(
        Message.objects.order_by("id").values_list(
            "id", "topic", "group_name", "status", "lease_owner"
        )
    )


def move(api, body):
    return api.post("/api/v1/messages/move", body)


def test_it_moves_waiting_and_dead_messages_and_skips_the_running_one(shop_admin_api, three):
    ids = [three["running"], three["dead"], three["waiting"]]

    response = move(
        shop_admin_api, {"ids": ids, "to_topic": "orders.parking", "to_group": "parked"}
    )

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["count"] == 2
    assert body["skipped"] == [{"id": three["running"], "reason": "running"}]
    moved = {m["moved_from"]: m["id"] for m in body["moved"]}
    assert set(moved) == {three["dead"], three["waiting"]}
    for original, copy_id in moved.items():
        copy = Message.objects.get(id=copy_id)
        assert (copy.topic, copy.group_name, copy.status) == ("orders.parking", "parked", "NEW")
        assert copy.headers == {"mq-moved-from": str(original)} and copy.retry_remaining == 1
        assert copy.id > max(ids) and copy.attempt == 0
        assert Message.objects.get(id=original).status == "CANCELLED"
    # The running message stays with its consumer.
    running = Message.objects.get(id=three["running"])
    assert running.status == "RUNNING" and running.lease_owner == "c1" and running.topic == "orders"
    # Both traces record the move, each naming the other message.
    original = shop_admin_api.get(f"/api/v1/messages/{three['dead']}").json()
    assert (
        original["trace"][-1]["event"] == "moved"
        and str(moved[three["dead"]]) in original["trace"][-1]["log"]
    )
    copy = shop_admin_api.get(f"/api/v1/messages/{moved[three['dead']]}").json()
    assert [e["event"] for e in copy["trace"]] == ["produced", "moved"]
    assert (
        str(three["dead"]) in copy["trace"][-1]["log"]
        and "orders/default" in copy["trace"][-1]["log"]
    )
    assert copy["data"] == {"n": 1} and copy["key"] == "k1"


def test_it_delivers_moved_messages_in_the_target_and_never_moves_one_twice(
    shop_admin_api, shop, three
):
    body = {
        "ids": [three["dead"], three["waiting"]],
        "to_topic": "orders.parking",
        "to_group": "parked",
    }
    assert move(shop_admin_api, body).json()["count"] == 2

    again = move(shop_admin_api, body).json()

    assert again["count"] == 0
    assert {s["reason"] for s in again["skipped"]} == {"cancelled"}
    consumer = make_api(["consume:orders*"], shop)
    pulled = pull(consumer, "orders.parking", group="parked", max_messages=10)
    assert sorted(m["data"]["n"] for m in pulled) == [1, 2]
    # The source group delivers nothing more: the waiting one left it.
    assert pull(consumer, "orders", max_messages=10) == []


def test_it_moves_by_filter_and_reports_the_running_ones(shop_admin_api, three):
    response = move(
        shop_admin_api,
        {"filter": {"topic": "orders"}, "to_topic": "orders.parking", "to_group": "g"},
    )

    assert response.status_code == 200, response.content
    body = response.json()
    assert sorted(m["moved_from"] for m in body["moved"]) == [three["dead"], three["waiting"]]
    assert body["skipped"] == [{"id": three["running"], "reason": "running"}]


@override_settings(MQ_REDRIVE_SYNC_LIMIT=2)
def test_it_moves_a_large_filter_as_a_job_with_progress(shop_admin_api, producer_api, topics):
    ids = [
        e["id"]
        for e in produce(
            producer_api, *({"topic": "orders", "group": "default", "data": n} for n in range(5))
        )
    ]

    response = move(
        shop_admin_api,
        {
            "filter": {"topic": "orders", "status": ["NEW"]},
            "to_topic": "orders.parking",
            "to_group": "parked",
        },
    )

    assert response.status_code == 202, response.content
    job_id = response.json()["job"]
    assert not Message.objects.filter(topic="orders.parking").exists()
    assert bulk_job_run(job_id=job_id, max_batches=1).state == BulkJob.State.RUNNING
    bulk_job_run(job_id=job_id)
    bulk_job_run(job_id=job_id)
    job = shop_admin_api.get(f"/api/v1/jobs/{job_id}").json()
    assert (
        job["state"] == "done"
        and job["processed"] == 5
        and job["total"] == 5
        and job["kind"] == "move"
    )
    copies = Message.objects.filter(topic="orders.parking", group_name="parked")
    assert sorted(int(c.headers["mq-moved-from"]) for c in copies) == ids
    assert set(Message.objects.filter(id__in=ids).values_list("status", flat=True)) == {"CANCELLED"}


def test_it_refuses_a_target_of_another_business_line_or_unknown(shop_admin_api, three):
    before, traces = snapshot(), MessageTrace.objects.count()
    ids = [three["dead"], three["waiting"]]

    expect_error(
        move(shop_admin_api, {"ids": ids, "to_topic": "ledger", "to_group": "g"}), 404, "not_found"
    )
    expect_error(
        move(shop_admin_api, {"ids": ids, "to_topic": "nowhere", "to_group": "g"}), 404, "not_found"
    )

    assert snapshot() == before and MessageTrace.objects.count() == traces


def test_it_moves_nothing_of_another_business_line(outsider_api, three):
    before = snapshot()

    response = move(
        outsider_api,
        {"ids": [three["dead"], three["waiting"]], "to_topic": "ledger", "to_group": "g"},
    )

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["count"] == 0
    assert sorted(s["id"] for s in body["skipped"]) == [three["dead"], three["waiting"]]
    assert {s["reason"] for s in body["skipped"]} == {"not_found"}
    assert snapshot() == before


def test_it_needs_the_admin_scope(producer_api, three):
    expect_error(
        move(producer_api, {"ids": [three["dead"]], "to_topic": "orders.parking", "to_group": "g"}),
        403,
        "forbidden",
    )


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"ids": [1], "to_group": "g"}, "to_topic"),
        ({"ids": [1], "to_topic": "orders.parking"}, "to_group"),
        ({"ids": [1], "to_topic": "bad topic!", "to_group": "g"}, "to_topic"),
        ({"ids": [1], "to_topic": "orders.parking", "to_group": ""}, "to_group"),
        ({"to_topic": "orders.parking", "to_group": "g"}, "ids"),
        ({"ids": ["x"], "to_topic": "orders.parking", "to_group": "g"}, "ids[0]"),
        ({"filter": {}, "to_topic": "orders.parking", "to_group": "g"}, "filter"),
        (
            {
                "filter": {"finished_after": "2024-01-01T00:00:00Z"},
                "to_topic": "orders.parking",
                "to_group": "g",
            },
            "filter.finished_after",
        ),
        ({"ids": [1], "to_topic": "orders.parking", "to_group": "g", "priority": 1}, "priority"),
    ],
)
def test_it_refuses_bad_input_with_the_field_and_changes_nothing(
    shop_admin_api, three, body, field
):
    before, traces = snapshot(), MessageTrace.objects.count()

    expect_error(move(shop_admin_api, body), 400, "invalid_request", field)

    assert snapshot() == before and MessageTrace.objects.count() == traces


def test_a_move_audits_its_filter_and_count_not_every_id(shop_admin_api, producer_api, topics):
    from mqcenter.models import AuditEntry

    produce(producer_api, *({"topic": "orders", "group": "default", "data": n} for n in range(300)))
    # A JSON filter's status may be one status as well as a list.
    response = move(shop_admin_api, {"filter": {"topic": "orders", "status": "NEW"},
                                     "to_topic": "orders.parking", "to_group": "g"})
    assert response.status_code == 200, response.content
    assert response.json()["count"] == 300
    entry = AuditEntry.objects.get(action="message.move")
    assert entry.after == {"filter": {"topic": "orders", "status": ["NEW"]}, "to": "orders.parking/g", "count": 300}

    ids = [m.id for m in Message.objects.filter(topic="orders.parking", status="NEW")[:3]]
    assert move(shop_admin_api, {"ids": ids, "to_topic": "orders", "to_group": "back"}).json()["count"] == 3
    assert AuditEntry.objects.filter(action="message.move").latest("id").after == {
        "selected": 3, "to": "orders/back", "count": 3}


def test_a_json_filter_refuses_a_status_of_another_type(shop_admin_api, topics):
    for status in (5, "", ["NEW", 1]):
        expect_error(move(shop_admin_api, {"filter": {"topic": "orders", "status": status},
                                           "to_topic": "orders.parking", "to_group": "g"}), 400, "invalid_request")
