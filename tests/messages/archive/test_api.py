"""The archive as a place of its own: search with the message filters and keyset pages,
one archived message with its trace, and redrive copies back into the live table."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from messages.archive.models import MessageArchive
from messages.models import Message, MessageTrace
from messages.operations.bulk import bulk_job_run
from messages.operations.models import BulkJob
from tests.support.api import ack, expect_error, produce, pull
from tests.support.archive import archive_messages

pytestmark = pytest.mark.django_db


@pytest.fixture
def orders(admin_api, shop):
    response = admin_api.post(
        "/api/v1/topics", {"topic": "orders", "biz": "shop", "retry_count": 2}
    )
    assert response.status_code == 201
    return response.json()


@pytest.fixture
def archived(producer_api, consumer_api, orders):
    """Six archived messages of orders/default: n=0..3 SUCCESS (key "even"/"odd"), n=4,5 FAIL;
    and one message still live."""
    items = [
        {
            "topic": "orders",
            "group": "default",
            "data": {"n": n},
            "key": "even" if n % 2 == 0 else "odd",
            "retry_count": 0,
            "headers": {"trace": f"t{n}"},
        }
        for n in range(6)
    ]
    ids = [e["id"] for e in produce(producer_api, *items)]
    assert len(pull(consumer_api, "orders", max_messages=6)) == 6
    ack(
        consumer_api,
        "c1",
        *({"id": i, "status": "SUCCESS" if n < 4 else "FAIL"} for n, i in enumerate(ids)),
    )
    archive_messages(ids)
    live = produce(producer_api, {"topic": "orders", "group": "default", "data": {"n": "live"}})[0][
        "id"
    ]
    return {"ids": ids, "live": live}


def search(api, **params):
    response = api.get("/api/v1/archive/messages", params)
    assert response.status_code == 200, response.content
    return response.json()


# --- search -------------------------------------------------------------------------------


def test_it_pages_through_the_archive_newest_first_without_gaps(admin_api, archived):
    seen, cursor, pages = [], None, 0
    while True:
        body = search(admin_api, topic="orders", limit=4, **({"cursor": cursor} if cursor else {}))
        seen += [m["id"] for m in body["messages"]]
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert pages == 2
    assert seen == sorted(archived["ids"], reverse=True)  # the live message is not in the archive
    first = search(admin_api, id=str(archived["ids"][0]))["messages"][0]
    assert first["data"] == {"n": 0} and first["status"] == "SUCCESS" and first["archived_at"]
    assert first["headers"] == {"trace": "t0"} and first["group"] == "default"


def test_it_filters_the_archive_by_status_key_and_finish_time(admin_api, archived):
    ids = archived["ids"]
    assert [m["id"] for m in search(admin_api, status="FAIL")["messages"]] == [ids[5], ids[4]]
    assert [m["id"] for m in search(admin_api, key="odd", status="SUCCESS")["messages"]] == [
        ids[3],
        ids[1],
    ]
    assert [m["id"] for m in search(admin_api, text='"n":2')["messages"]] == [ids[2]]
    # Finished at different times: n finished n hours after the first.
    base = timezone.now() - timedelta(days=30)
    for n, message_id in enumerate(ids):
        MessageArchive.objects.filter(id=message_id).update(update_time=base + timedelta(hours=n))
    after = (base + timedelta(hours=2)).isoformat()
    before = (base + timedelta(hours=4)).isoformat()
    assert [m["id"] for m in search(admin_api, finished_after=after)["messages"]] == [
        ids[5],
        ids[4],
        ids[3],
        ids[2],
    ]
    assert [
        m["id"] for m in search(admin_api, finished_after=after, finished_before=before)["messages"]
    ] == [ids[3], ids[2]]
    assert search(admin_api, topic="elsewhere")["messages"] == []


def test_it_shows_no_archived_message_of_another_business_line(
    outsider_api, shop_admin_api, archived
):
    assert search(outsider_api, topic="orders")["messages"] == []
    assert len(search(shop_admin_api, topic="orders")["messages"]) == 6
    expect_error(
        outsider_api.get(f"/api/v1/archive/messages/{archived['ids'][0]}"), 404, "not_found"
    )


def test_an_archived_first_delivery_success_shows_its_ack_from_its_row(shop_admin_api, archived):
    done = archived["ids"][0]
    assert not MessageTrace.objects.filter(message_id=done, event="acked").exists()

    body = shop_admin_api.get(f"/api/v1/archive/messages/{done}").json()

    assert [e["event"] for e in body["trace"]] == ["produced", "pulled", "acked", "archived"]
    acked = body["trace"][2]
    assert (acked["actor"], acked["attempt"], acked["status"], acked["log"]) == ("c1", 1, "SUCCESS", "")
    assert acked["at"] == body["update_time"]


def test_it_shows_an_archived_message_with_its_trace(shop_admin_api, archived):
    dead = archived["ids"][4]

    response = shop_admin_api.get(f"/api/v1/archive/messages/{dead}")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["id"] == dead and body["status"] == "FAIL" and body["data"] == {"n": 4}
    events = [e["event"] for e in body["trace"]]
    assert (
        events[0] == "produced"
        and "pulled" in events
        and "dead" in events
        and events[-1] == "archived"
    )
    # A live message is not in the archive.
    expect_error(
        shop_admin_api.get(f"/api/v1/archive/messages/{archived['live']}"), 404, "not_found"
    )


# --- redrive ------------------------------------------------------------------------------


def test_an_archive_redrive_audits_its_filter_and_count_not_every_id(shop_admin_api, archived):
    from mqcenter.models import AuditEntry

    response = shop_admin_api.post("/api/v1/archive/messages/redrive", {"filter": {"topic": "orders"}})
    assert response.status_code == 200, response.content
    count = response.json()["count"]
    assert count > 1
    assert AuditEntry.objects.get(action="archive.redrive").after == {"filter": {"topic": "orders"}, "count": count}


def test_it_redrives_archived_messages_as_new_copies(shop_admin_api, consumer_api, archived):
    ids = archived["ids"]

    response = shop_admin_api.post("/api/v1/archive/messages/redrive", {"ids": [ids[4], ids[5]]})

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["count"] == 2 and body["skipped"] == []
    assert sorted(c["replay_of"] for c in body["copies"]) == [ids[4], ids[5]]
    copies = Message.objects.filter(id__in=[c["id"] for c in body["copies"]]).order_by("id")
    assert [c.data for c in copies] == ['{"n":4}', '{"n":5}']
    for copy, original in zip(copies, (ids[4], ids[5]), strict=True):
        assert copy.id > archived["live"] and copy.status == "NEW" and copy.group_name == "default"
        assert copy.headers == {"trace": f"t{copy.data[5]}", "mq-replay-of": str(original)}
        assert copy.retry_remaining == 2 and copy.attempt == 0 and copy.key in ("even", "odd")
    # The originals stay archived, with the redrive in their trace.
    assert MessageArchive.objects.filter(id__in=[ids[4], ids[5]], status="FAIL").count() == 2
    original = shop_admin_api.get(f"/api/v1/archive/messages/{ids[4]}").json()
    assert (
        original["trace"][-1]["event"] == "redriven"
        and str(copies[0].id) in original["trace"][-1]["log"]
    )
    detail = shop_admin_api.get(f"/api/v1/messages/{copies[0].id}").json()
    assert [e["event"] for e in detail["trace"]] == ["produced", "redriven"]
    # It keeps the original's add time and answers when it was made (API.md 1.2, Copies).
    made = datetime.fromisoformat(detail["copied_at"].replace("Z", "+00:00"))
    assert made == detail_time(detail["trace"][-1]["at"]) and made > copies[0].add_time
    assert shop_admin_api.get(f"/api/v1/archive/messages/{ids[4]}").json()["copied_at"] is None
    # The copies are delivered like any message.
    pulled = pull(consumer_api, "orders", max_messages=10)
    assert {m["id"] for m in pulled} == {archived["live"], *(c.id for c in copies)}


def test_it_redrives_by_filter(shop_admin_api, archived):
    response = shop_admin_api.post(
        "/api/v1/archive/messages/redrive",
        {"filter": {"topic": "orders", "status": ["SUCCESS"], "key": "even"}},
    )

    assert response.status_code == 200, response.content
    assert sorted(c["replay_of"] for c in response.json()["copies"]) == [
        archived["ids"][0],
        archived["ids"][2],
    ]
    assert Message.objects.filter(headers__has_key="mq-replay-of").count() == 2


@override_settings(MQ_REDRIVE_SYNC_LIMIT=3)
def test_it_redrives_a_large_filter_as_a_job_with_progress(shop_admin_api, archived):
    response = shop_admin_api.post(
        "/api/v1/archive/messages/redrive", {"filter": {"topic": "orders"}}
    )

    assert response.status_code == 202, response.content
    job_id = response.json()["job"]
    assert not Message.objects.filter(headers__has_key="mq-replay-of").exists()
    job = bulk_job_run(job_id=job_id, max_batches=1)  # the worker's task, one batch at a time
    assert job.state == BulkJob.State.RUNNING and job.total == 6
    bulk_job_run(job_id=job_id)
    bulk_job_run(job_id=job_id)  # a finished job does nothing
    body = shop_admin_api.get(f"/api/v1/jobs/{job_id}").json()
    assert body["state"] == "done" and body["processed"] == 6 and body["kind"] == "archive_redrive"
    copied = Message.objects.filter(headers__has_key="mq-replay-of").values_list(
        "headers", flat=True
    )
    assert sorted(int(h["mq-replay-of"]) for h in copied) == sorted(archived["ids"])


def test_it_redrives_nothing_of_another_business_line(outsider_api, archived):
    response = outsider_api.post("/api/v1/archive/messages/redrive", {"ids": archived["ids"]})

    assert response.status_code == 200 and response.json()["count"] == 0
    assert response.json()["skipped"] == [{"id": i, "reason": "not_found"} for i in archived["ids"]]
    assert Message.objects.count() == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "ids"),
        ({"ids": "1"}, "ids"),
        ({"ids": [1], "filter": {"topic": "orders"}}, "ids"),
        ({"filter": {}}, "filter"),
        ({"filter": {"bogus": "x"}}, "filter.bogus"),
        ({"filter": {"finished_after": "yesterday"}}, "filter.finished_after"),
        ({"filter": {"finished_before": "2024-01-01T00:00:00"}}, "filter.finished_before"),
        ({"filter": {"status": ["LOST"]}}, "filter.status"),
        ({"ids": [1], "to_topic": "x"}, "to_topic"),
    ],
)
def test_it_refuses_a_bad_redrive_and_changes_nothing(shop_admin_api, archived, body, field):
    traces = MessageTrace.objects.count()
    expect_error(
        shop_admin_api.post("/api/v1/archive/messages/redrive", body), 400, "invalid_request", field
    )
    assert Message.objects.count() == 1 and MessageTrace.objects.count() == traces


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"finished_after": "soon"}, "finished_after"),
        ({"added_before": "2024-13-01T00:00:00Z"}, "added_before"),
        ({"limit": "many"}, "limit"),
        ({"cursor": "not-a-cursor"}, "cursor"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_it_refuses_a_bad_search_with_the_field(admin_api, archived, params, field):
    expect_error(admin_api.get("/api/v1/archive/messages", params), 400, "invalid_request", field)


def detail_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
