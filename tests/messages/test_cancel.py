"""Cancel: a message not yet delivered is withdrawn (CANCELLED, finished, not dead)."""

from __future__ import annotations

from typing import Any

from django.test import override_settings

from messages.models import Message, Status
from messages.operations.bulk import bulk_job_run
from messages.operations.models import BulkJob
from tests.conftest import Api
from tests.support.api import expect_error, produce, pull


def test_it_cancels_a_new_or_delayed_message_which_is_then_never_delivered(shop_admin_api: Api, consumer_api: Api) -> None:
    now, later = produce(shop_admin_api, {"topic": "orders", "data": 1}, {"topic": "orders", "data": 2, "delay_seconds": 60})
    for stored in (now, later):
        response = shop_admin_api.post(f"/api/v1/messages/{stored['id']}/cancel", {})
        assert response.status_code == 200, response.content
        assert response.json()["status"] == "CANCELLED"
        assert response.json()["trace"][-1]["event"] == "cancelled"
    assert pull(consumer_api, "orders") == []
    # A repeated cancel (a retried request) is harmless.
    assert shop_admin_api.post(f"/api/v1/messages/{now['id']}/cancel", {}).status_code == 200


def test_it_refuses_to_cancel_a_running_or_finished_message(shop_admin_api: Api, consumer_api: Api) -> None:
    stored = produce(shop_admin_api, {"topic": "orders", "data": 1})[0]
    pull(consumer_api, "orders", consumer="c1")
    expect_error(shop_admin_api.post(f"/api/v1/messages/{stored['id']}/cancel", {}), 409, "conflict")
    assert Message.objects.get(id=stored["id"]).status == Status.RUNNING
    consumer_api.post("/api/v1/ack", {"consumer": "c1", "results": [{"id": stored["id"], "status": "SUCCESS"}]})
    expect_error(shop_admin_api.post(f"/api/v1/messages/{stored['id']}/cancel", {}), 409, "conflict")
    expect_error(shop_admin_api.post("/api/v1/messages/999999999/cancel", {}), 404, "not_found")


def test_it_needs_admin_scope_and_stays_inside_the_business_line(
    shop_admin_api: Api, producer_api: Api, outsider_api: Api
) -> None:
    stored = produce(shop_admin_api, {"topic": "orders", "data": 1})[0]
    expect_error(producer_api.post(f"/api/v1/messages/{stored['id']}/cancel", {}), 403, "forbidden")
    response = outsider_api.post(f"/api/v1/messages/{stored['id']}/cancel", {})
    assert response.status_code in (403, 404)
    assert Message.objects.get(id=stored["id"]).status == Status.NEW


def test_it_cancels_in_bulk_only_what_is_waiting(shop_admin_api: Api, consumer_api: Api) -> None:
    stored = produce(shop_admin_api, *({"topic": "orders", "data": n} for n in range(4)))
    running = pull(consumer_api, "orders", max_messages=1)[0]
    response = shop_admin_api.post("/api/v1/messages/cancel", {"ids": [m["id"] for m in stored]})
    assert response.status_code == 200 and response.json() == {"count": 3}
    statuses = dict(Message.objects.values_list("id", "status"))
    assert statuses[running["id"]] == Status.RUNNING
    assert sorted(statuses.values()) == sorted([Status.RUNNING] + [Status.CANCELLED] * 3)
    expect_error(shop_admin_api.post("/api/v1/messages/cancel", {"filter": {}}), 400, "invalid_request", "filter")


def test_a_large_filter_cancels_through_a_bulk_job(shop_admin_api: Api) -> None:
    produce(shop_admin_api, *({"topic": "orders", "data": n} for n in range(5)))
    with override_settings(MQ_REDRIVE_SYNC_LIMIT=2):
        response = shop_admin_api.post("/api/v1/messages/cancel", {"filter": {"topic": "orders"}})
    assert response.status_code == 202, response.content
    job: Any = bulk_job_run(job_id=response.json()["job"])
    assert job.state == BulkJob.State.DONE and job.processed == 5
    assert set(Message.objects.values_list("status", flat=True)) == {Status.CANCELLED}
