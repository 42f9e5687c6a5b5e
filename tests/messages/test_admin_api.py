"""Administration of messages: search with keyset pages, detail with trace, edit, redrive,
delete, bulk jobs and stats."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from messages.models import Message, MessageTrace
from messages.operations.bulk import bulk_job_run
from messages.operations.models import BulkJob
from mqcenter.models import AuditEntry
from tests.support.api import ack, expect_error, produce, pull

pytestmark = pytest.mark.django_db


@pytest.fixture
def orders(admin_api, shop):
    response = admin_api.post("/api/v1/topics", {"topic": "orders", "biz": "shop", "retry_count": 2})
    assert response.status_code == 201
    return response.json()


def dead_letters(producer_api, consumer_api, count, topic="orders"):
    """`count` messages that failed for good (FAIL)."""
    ids = [e["id"] for e in produce(producer_api, *({"topic": topic, "data": i, "retry_count": 0} for i in range(count)))]
    pulled = pull(consumer_api, topic, consumer="c1", max_messages=count)
    assert len(pulled) == count
    ack(consumer_api, "c1", *({"id": i, "status": "FAIL"} for i in ids))
    return ids


# --- search -------------------------------------------------------------------------------


def test_it_walks_every_page_without_duplicates_or_gaps(admin_api, producer_api, orders):
    ids = [e["id"] for e in produce(producer_api, *({"topic": "orders", "data": i} for i in range(23)))]
    seen, cursor, pages = [], None, 0
    while True:
        params = {"topic": "orders", "limit": 5, **({"cursor": cursor} if cursor else {})}
        response = admin_api.get("/api/v1/messages", params)
        assert response.status_code == 200, response.content
        body = response.json()
        seen += [m["id"] for m in body["messages"]]
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert pages == 5
    assert seen == sorted(ids, reverse=True)


def test_it_filters_by_each_field(admin_api, producer_api, consumer_api, orders):
    a, b, c = (e["id"] for e in produce(
        producer_api,
        {"topic": "orders", "data": {"n": "alpha"}, "key": "k1", "group": "default"},
        {"topic": "orders", "data": {"n": "beta"}, "group": "g2", "key": "k2"},
        {"topic": "orders.eu", "data": {"n": "gamma"}},
    ))
    pull(consumer_api, "orders", consumer="c1")

    def found(**params):
        response = admin_api.get("/api/v1/messages", params)
        assert response.status_code == 200, response.content
        return sorted(m["id"] for m in response.json()["messages"])

    assert found(topic="orders") == [a, b]
    assert found(group="g2") == [b]
    assert found(status="RUNNING") == [a]
    assert found(status="NEW,RUNNING") == [a, b, c]
    assert found(key="k2") == [b]
    assert found(id=str(c)) == [c]
    assert found(text="gamma") == [c]
    future = (timezone.now() + timedelta(minutes=5)).isoformat()
    past = (timezone.now() - timedelta(minutes=5)).isoformat()
    assert found(added_after=past) == [a, b, c]
    assert found(added_after=future) == []
    assert found(added_before=future) == [a, b, c]
    assert found(added_before=past) == []


@pytest.mark.parametrize(("params", "field"), [
    ({"cursor": "not-a-cursor!!"}, "cursor"), ({"cursor": "eHl6OjE"}, "cursor"), ({"status": "LOST"}, "status"),
    ({"id": "x"}, "id"), ({"added_after": "yesterday"}, "added_after"), ({"added_after": "2024-13-01T00:00:00Z"}, "added_after"), ({"limit": "ten"}, "limit"), ({"limit": ""}, "limit"),
    ({"colour": "red"}, "colour"),
])
def test_it_refuses_a_bad_search(admin_api, params, field):
    expect_error(admin_api.get("/api/v1/messages", params), 400, "invalid_request", field)


def test_it_hides_other_business_lines_messages_from_search(admin_api, producer_api, outsider_api, orders):
    produce(producer_api, {"topic": "orders", "data": 1})
    body = outsider_api.get("/api/v1/messages").json()
    assert body == {"messages": [], "next_cursor": None}
    assert len(admin_api.get("/api/v1/messages").json()["messages"]) == 1


# --- detail and edit ----------------------------------------------------------------------


def test_it_shows_a_message_with_its_trace_in_order(admin_api, producer_api, consumer_api, orders):
    # A group of its own: pull traces read rank/total through a one-second per-group cache.
    hb = consumer_api.post("/api/v1/registry/consumers", {"consumer": "c1", "subscriptions": [
        {"topic": "orders", "group": "traced"}]})
    assert hb.status_code == 200
    [entry] = produce(producer_api, {"topic": "orders", "group": "traced", "data": {"x": 1}, "retry_count": 1})
    pull(consumer_api, "orders", group="traced", consumer="c1")
    ack(consumer_api, "c1", {"id": entry["id"], "status": "FAIL", "log": "nope"})
    response = admin_api.get(f"/api/v1/messages/{entry['id']}")
    assert response.status_code == 200
    body = response.json()
    assert body["id"] == entry["id"] and body["data"] == {"x": 1} and body["status"] == "NEW"
    assert [e["event"] for e in body["trace"]] == ["produced", "pulled", "nacked", "retry_scheduled"]
    produced, pulled = body["trace"][:2]
    # The "produced" event is read off the message row: no trace row of its own.
    assert produced["actor"] == "produce:orders*" and (produced["attempt"], produced["status"]) == (0, "NEW")
    assert produced["at"] == body["add_time"]
    # So is the claim's "pulled" event: the nack and the retry are the only trace rows.
    assert MessageTrace.objects.filter(message_id=entry["id"]).count() == 2
    assert pulled["actor"] == "c1" and pulled["attempt"] == 1 and (pulled["rank"], pulled["total"]) == (0, 1)
    assert body["trace"][2]["log"] == "nope"


def test_it_shows_the_ack_of_a_first_delivery_from_its_row(admin_api, producer_api, consumer_api, orders):
    [entry] = produce(producer_api, {"topic": "orders", "data": 1})
    pull(consumer_api, "orders", consumer="c1")
    ack(consumer_api, "c1", {"id": entry["id"], "status": "SUCCESS"})
    assert not MessageTrace.objects.filter(message_id=entry["id"]).exists()  # the row holds it all
    row = Message.objects.get(id=entry["id"])

    body = admin_api.get(f"/api/v1/messages/{entry['id']}").json()

    assert [e["event"] for e in body["trace"]] == ["produced", "pulled", "acked"]
    acked = body["trace"][2]
    assert acked == {"event": "acked", "actor": "c1", "at": body["update_time"], "attempt": 1, "rank": None,
                     "total": None, "status": "SUCCESS", "log": ""}
    assert body["update_time"].startswith(row.update_time.strftime("%Y-%m-%dT%H:%M:%S"))


def test_it_answers_404_for_unknown_or_foreign_messages(admin_api, producer_api, outsider_api, orders):
    expect_error(admin_api.get("/api/v1/messages/987654321"), 404, "not_found")
    [entry] = produce(producer_api, {"topic": "orders", "data": 1})
    response = outsider_api.get(f"/api/v1/messages/{entry['id']}")
    assert response.status_code in (403, 404)
    error_code = expect_error(response, response.status_code, "forbidden" if response.status_code == 403 else "not_found")
    assert "data" not in error_code["details"]


def test_it_edits_a_message_with_trace_and_audit(admin_api, producer_api, orders):
    [entry] = produce(producer_api, {"topic": "orders", "data": {"v": 1}})
    due = (timezone.now() + timedelta(hours=1)).replace(microsecond=0)
    response = admin_api.patch(f"/api/v1/messages/{entry['id']}", {
        "data": {"v": 2}, "status": "FAIL", "effect_time": due.isoformat(), "retry_remaining": 4})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["data"] == {"v": 2} and body["status"] == "FAIL" and body["retry_remaining"] == 4
    assert body["trace"][-1]["event"] == "edited"
    row = Message.objects.get(id=entry["id"])
    assert (row.data, row.status, row.effect_time, row.retry_remaining) == ('{"v":2}', "FAIL", due, 4)
    audit = AuditEntry.objects.get(action="message.edit")
    assert audit.before["status"] == "NEW" and audit.after["status"] == "FAIL"


def test_it_makes_the_running_consumer_s_ack_stale_after_an_edit(admin_api, producer_api, consumer_api, orders):
    [entry] = produce(producer_api, {"topic": "orders", "data": 1})
    pull(consumer_api, "orders", consumer="c1")
    assert admin_api.patch(f"/api/v1/messages/{entry['id']}", {"data": 2}).status_code == 200
    assert ack(consumer_api, "c1", {"id": entry["id"], "status": "SUCCESS"})[0]["outcome"] == "stale"
    row = Message.objects.get(id=entry["id"])
    assert row.status == "NEW" and row.data == "2"


@pytest.mark.parametrize(("body", "field"), [
    ({}, ""), ({"status": "RUNNING"}, "status"), ({"status": "DONE"}, "status"),
    ({"effect_time": "soon"}, "effect_time"), ({"effect_time": "2024-01-01T12:99:00Z"}, "effect_time"),
    ({"retry_remaining": -1}, "retry_remaining"),
    ({"retry_remaining": "3"}, "retry_remaining"), ({"attempt": 3}, "attempt"),
    ({"topic": "x"}, "topic"), ({"data": 1, "status": True}, "status"),
])
def test_it_refuses_a_bad_edit(admin_api, producer_api, orders, body, field):
    [entry] = produce(producer_api, {"topic": "orders", "data": 1})
    expect_error(admin_api.patch(f"/api/v1/messages/{entry['id']}", body), 400, "invalid_request", field)
    assert Message.objects.get(id=entry["id"]).data == "1"


# --- redrive and delete -------------------------------------------------------------------


def test_it_redrives_dead_letters_by_ids(admin_api, producer_api, consumer_api, orders):
    dead = dead_letters(producer_api, consumer_api, 2)
    [alive] = produce(producer_api, {"topic": "orders", "data": "alive"})
    response = admin_api.post("/api/v1/messages/redrive", {"ids": [*dead, alive["id"]]})
    assert response.status_code == 200 and response.json() == {"count": 2}
    rows = Message.objects.filter(id__in=dead)
    assert {(r.status, r.retry_remaining) for r in rows} == {("NEW", 2)}
    assert MessageTrace.objects.filter(message_id__in=dead, event="redriven").count() == 2
    assert len(pull(consumer_api, "orders", consumer="c2", max_messages=10)) == 3


def test_it_redrives_by_filter(admin_api, producer_api, consumer_api, orders):
    dead_letters(producer_api, consumer_api, 3)
    response = admin_api.post("/api/v1/messages/redrive", {"filter": {"topic": "orders", "status": ["FAIL"]}})
    assert response.status_code == 200 and response.json() == {"count": 3}
    assert Message.objects.filter(status="NEW").count() == 3


def test_it_answers_a_job_for_a_large_redrive_filter(admin_api, producer_api, consumer_api, orders):
    dead = dead_letters(producer_api, consumer_api, 4)
    with override_settings(MQ_REDRIVE_SYNC_LIMIT=2):
        response = admin_api.post("/api/v1/messages/redrive", {"filter": {"topic": "orders"}})
    assert response.status_code == 202, response.content
    job_id = response.json()["job"]
    job = admin_api.get(f"/api/v1/jobs/{job_id}")
    assert job.status_code == 200 and job.json()["state"] == "queued" and job.json()["kind"] == "redrive"
    bulk_job_run(job_id=job_id)
    body = admin_api.get(f"/api/v1/jobs/{job_id}").json()
    assert body["state"] == "done" and body["processed"] == 4 and body["total"] == 4
    assert set(Message.objects.filter(id__in=dead).values_list("status", flat=True)) == {"NEW"}


def test_it_answers_a_job_for_a_large_delete_filter(admin_api, producer_api, orders):
    produce(producer_api, *({"topic": "orders", "data": i} for i in range(3)))
    with override_settings(MQ_REDRIVE_SYNC_LIMIT=2):
        response = admin_api.post("/api/v1/messages/delete", {"filter": {"topic": "orders"}})
    assert response.status_code == 202
    bulk_job_run(job_id=response.json()["job"])
    assert Message.objects.count() == 0


def test_it_hides_another_biz_s_job(admin_api, producer_api, outsider_api, shop_admin_api, orders):
    produce(producer_api, *({"topic": "orders", "data": i} for i in range(3)))
    with override_settings(MQ_REDRIVE_SYNC_LIMIT=1):
        job_id = shop_admin_api.post("/api/v1/messages/delete", {"filter": {"topic": "orders"}}).json()["job"]
    expect_error(outsider_api.get(f"/api/v1/jobs/{job_id}"), 404, "not_found")
    expect_error(admin_api.get("/api/v1/jobs/987654"), 404, "not_found")
    assert BulkJob.objects.get(id=job_id).state == "queued"


def test_it_deletes_by_id_and_by_filter(admin_api, producer_api, orders):
    a, b, c = (e["id"] for e in produce(producer_api, *({"topic": "orders", "data": i, "key": f"k{i}"} for i in range(3))))
    assert admin_api.delete(f"/api/v1/messages/{a}").status_code == 204
    expect_error(admin_api.delete(f"/api/v1/messages/{a}"), 404, "not_found")
    response = admin_api.post("/api/v1/messages/delete", {"filter": {"key": "k1"}})
    assert response.status_code == 200 and response.json() == {"count": 1}
    assert list(Message.objects.values_list("id", flat=True)) == [c]
    assert not MessageTrace.objects.filter(message_id__in=[a, b]).exists()
    assert admin_api.post("/api/v1/messages/delete", {"ids": [c]}).json() == {"count": 1}
    assert AuditEntry.objects.filter(action="message.delete").count() == 3


@pytest.mark.parametrize("path", ["/api/v1/messages/redrive", "/api/v1/messages/delete", "/api/v1/messages/requeue"])
@pytest.mark.parametrize(("body", "field"), [
    ({}, "ids"), ({"ids": [1], "filter": {"topic": "x"}}, "ids"), ({"ids": []}, "ids"), ({"ids": ["1"]}, "ids[0]"),
    ({"filter": {}}, "filter"), ({"filter": "topic=x"}, "filter"), ({"filter": {"colour": "red"}}, "filter.colour"),
    ({"filter": {"status": ["LOST"]}}, "filter.status"), ({"what": 1}, "what"),
    ({"filter": {"group": 0.0}}, "filter.group"), ({"filter": {"added_after": ""}}, "filter.added_after"),
    ({"filter": {"id": "7"}}, "filter.id"), ({"filter": {"status": 5}}, "filter.status"),
])
def test_it_refuses_a_bad_bulk_request(admin_api, path, body, field):
    expect_error(admin_api.post(path, body), 400, "invalid_request", field)


def test_it_never_redrives_or_deletes_another_biz_s_messages(producer_api, consumer_api, outsider_api, orders):
    dead = dead_letters(producer_api, consumer_api, 2)
    assert outsider_api.post("/api/v1/messages/redrive", {"ids": dead}).json() == {"count": 0}
    assert outsider_api.post("/api/v1/messages/delete", {"filter": {"topic": "orders"}}).json() == {"count": 0}
    assert set(Message.objects.values_list("status", flat=True)) == {"FAIL"}


# --- stats --------------------------------------------------------------------------------


def test_it_counts_by_status_per_topic_and_group(admin_api, producer_api, consumer_api, outsider_api, orders):
    produce(producer_api, *({"topic": "orders", "data": i, "group": "default"} for i in range(3)),
            {"topic": "orders", "group": "g", "data": 9})
    pull(consumer_api, "orders", consumer="c1", max_messages=1)
    response = admin_api.get("/api/v1/stats")
    assert response.status_code == 200
    stats = {(s["topic"], s["group"]): s for s in response.json()["stats"]}
    assert stats[("orders", "default")]["counts"] == {"NEW": 2, "RUNNING": 1, "SUCCESS": 0, "FAIL": 0, "TIMEOUT": 0,
                                                      "EXPIRED": 0, "PREPARED": 0, "CANCELLED": 0}
    assert stats[("orders", "g")]["counts"]["NEW"] == 1
    assert stats[("orders", "default")]["oldest_deliverable_age_seconds"] >= 0
    # the oldest due message, whatever its priority; a delayed one does not count
    now = timezone.now()
    first, second = Message.objects.filter(topic="orders", group_name="default", status="NEW").order_by("id")
    Message.objects.filter(id=first.id).update(effect_time=now - timedelta(minutes=9), priority=0)
    Message.objects.filter(id=second.id).update(effect_time=now + timedelta(minutes=30), priority=9)
    oldest = {(s["topic"], s["group"]): s["oldest_deliverable_age_seconds"]
              for s in admin_api.get("/api/v1/stats").json()["stats"]}
    assert 9 * 60 <= oldest[("orders", "default")] < 10 * 60
    assert admin_api.get("/api/v1/stats", {"topic": "nothing"}).json() == {"stats": []}
    assert outsider_api.get("/api/v1/stats").json() == {"stats": []}


def test_it_requeues_finished_messages_but_never_running_ones(admin_api, producer_api, consumer_api, orders):
    done, running = (e["id"] for e in produce(producer_api, {"topic": "orders", "data": 1}, {"topic": "orders", "data": 2}))
    pull(consumer_api, "orders", consumer="c1", max_messages=2)
    ack(consumer_api, "c1", {"id": done, "status": "SUCCESS"})
    response = admin_api.post("/api/v1/messages/requeue", {"ids": [done, running]})
    assert response.status_code == 200 and response.json() == {"count": 1}
    assert Message.objects.get(id=done).status == "NEW"
    assert Message.objects.get(id=running).status == "RUNNING"
