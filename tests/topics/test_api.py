"""Administration of business lines and topics: CRUD, every setting, biz isolation."""

from __future__ import annotations

import pytest

from mqcenter.models import AuditEntry
from tests.support.api import expect_error, produce
from topics.models import Biz, Topic

pytestmark = pytest.mark.django_db

FULL_TOPIC = {
    "topic": "orders", "biz": "shop", "owner": "ann", "description": "order events",
    "retry_count": 3, "retry_strategy": "exponential", "retry_interval_seconds": 10,
    "timeout_seconds": 60, "retention_days": 7, "alarm_emails": ["ops@example.com"],
    "backlog_alarm_threshold": 10000, "paused": False,
    "groups": [{"group": "audit", "mode": "serial"}, {"group": "billing", "mode": "queue"}],
}


# --- business lines -----------------------------------------------------------------------


def test_it_creates_reads_updates_and_deletes_a_biz(admin_api):
    response = admin_api.post("/api/v1/biz", {"name": "logistics", "title": "Logistics", "description": "trucks"})
    assert response.status_code == 201, response.content
    created = response.json()
    assert {k: created[k] for k in ("name", "title", "description")} == {
        "name": "logistics", "title": "Logistics", "description": "trucks"}
    biz_id = created["id"]
    assert admin_api.get(f"/api/v1/biz/{biz_id}").json()["name"] == "logistics"
    assert "logistics" in [b["name"] for b in admin_api.get("/api/v1/biz").json()]
    patched = admin_api.patch(f"/api/v1/biz/{biz_id}", {"title": "Trucks"})
    assert patched.status_code == 200 and patched.json()["title"] == "Trucks"
    assert admin_api.delete(f"/api/v1/biz/{biz_id}").status_code == 204
    assert not Biz.objects.filter(id=biz_id).exists()
    expect_error(admin_api.get(f"/api/v1/biz/{biz_id}"), 404, "not_found")
    assert {"biz.create", "biz.update", "biz.delete"} <= set(AuditEntry.objects.values_list("action", flat=True))


def test_it_answers_409_for_a_taken_biz_name(admin_api, shop):
    expect_error(admin_api.post("/api/v1/biz", {"name": "shop"}), 409, "conflict", "name")


@pytest.mark.parametrize(("body", "field"), [
    ({}, "name"), ({"name": "bad name"}, "name"), ({"name": "ok", "title": 5}, "title"),
    ({"name": "ok", "extra": 1}, "extra"),
])
def test_it_refuses_a_bad_biz(admin_api, body, field):
    expect_error(admin_api.post("/api/v1/biz", body), 400, "invalid_request", field)


def test_it_refuses_renaming_a_biz(admin_api, shop):
    expect_error(admin_api.patch(f"/api/v1/biz/{shop.id}", {"name": "shop2"}), 400, "invalid_request", "name")


def test_it_refuses_deleting_a_biz_that_owns_topics(admin_api, shop):
    assert admin_api.post("/api/v1/topics", {"topic": "orders", "biz": "shop"}).status_code == 201
    expect_error(admin_api.delete(f"/api/v1/biz/{shop.id}"), 409, "conflict")


def test_it_shows_a_biz_admin_only_its_own_biz(shop_admin_api, shop, other_biz):
    assert [b["name"] for b in shop_admin_api.get("/api/v1/biz").json()] == ["shop"]
    expect_error(shop_admin_api.get(f"/api/v1/biz/{other_biz.id}"), 404, "not_found")
    expect_error(shop_admin_api.patch(f"/api/v1/biz/{other_biz.id}", {"title": "x"}), 404, "not_found")
    expect_error(shop_admin_api.delete(f"/api/v1/biz/{other_biz.id}"), 404, "not_found")
    expect_error(shop_admin_api.post("/api/v1/biz", {"name": "mine"}), 403, "forbidden")
    assert Biz.objects.filter(id=other_biz.id).exists()


# --- topics -------------------------------------------------------------------------------


def test_it_round_trips_every_topic_setting(admin_api, shop):
    response = admin_api.post("/api/v1/topics", FULL_TOPIC)
    assert response.status_code == 201, response.content
    for body in (response.json(), admin_api.get("/api/v1/topics/orders").json()):
        for field, value in FULL_TOPIC.items():
            if field == "groups":
                assert sorted(body["groups"], key=lambda g: g["group"]) == value
            else:
                assert body[field] == value, field


def test_it_applies_topic_defaults(admin_api):
    body = admin_api.post("/api/v1/topics", {"topic": "orders"}).json()
    assert (body["retry_count"], body["retry_strategy"], body["retry_interval_seconds"]) == (3, "exponential", 10)
    assert (body["timeout_seconds"], body["retention_days"], body["paused"]) == (60, 7, False)


@pytest.mark.parametrize(("field", "value"), [
    ("owner", "bob"), ("description", "<b>new</b>"), ("retry_count", 9), ("retry_strategy", "random"),
    ("retry_interval_seconds", 30), ("timeout_seconds", 5), ("retention_days", 30),
    ("alarm_emails", ["a@example.com", "b@example.com"]), ("backlog_alarm_threshold", 5), ("paused", True),
])
def test_it_patches_each_topic_setting(admin_api, shop, field, value):
    assert admin_api.post("/api/v1/topics", FULL_TOPIC).status_code == 201
    response = admin_api.patch("/api/v1/topics/orders", {field: value})
    assert response.status_code == 200, response.content
    assert response.json()[field] == value
    assert admin_api.get("/api/v1/topics/orders").json()[field] == value
    assert AuditEntry.objects.filter(action="topic.update").exists()


def test_it_adds_and_changes_group_modes_on_patch(admin_api, shop):
    admin_api.post("/api/v1/topics", FULL_TOPIC)
    response = admin_api.patch("/api/v1/topics/orders", {"groups": [{"group": "billing", "mode": "sharded"},
                                                                    {"group": "new", "mode": "serial"}]})
    assert response.status_code == 200
    assert sorted((g["group"], g["mode"]) for g in response.json()["groups"]) == [
        ("audit", "serial"), ("billing", "sharded"), ("new", "serial")]


@pytest.mark.parametrize(("body", "field"), [
    ({"topic": "bad topic"}, "topic"),
    ({"topic": "t", "retry_strategy": "sometimes"}, "retry_strategy"),
    ({"topic": "t", "retry_count": -1}, "retry_count"),
    ({"topic": "t", "timeout_seconds": 0}, "timeout_seconds"),
    ({"topic": "t", "alarm_emails": ["not-an-email"]}, "alarm_emails[0]"),
    ({"topic": "t", "groups": [{"group": "g", "mode": "fast"}]}, "groups[0].mode"),
    ({"topic": "t", "groups": [{"group": "g"}, {"group": "g"}]}, "groups"),
    ({"topic": "t", "biz": "nope"}, "biz"),
    ({"topic": "t", "colour": "red"}, "colour"),
    ({"topic": 5}, "topic"),
    ({"topic": "t", "retry_count": "3"}, "retry_count"),
    ({"topic": "t", "retry_count": True}, "retry_count"),
    ({"topic": "t", "paused": "yes"}, "paused"),
    ({"topic": "t", "owner": 5}, "owner"),
    ({"topic": "t", "alarm_emails": [5]}, "alarm_emails[0]"),
    ({"topic": "t", "groups": [{"group": 1}]}, "groups[0].group"),
    ({"topic": "t", "groups": [{"group": "g"}, {"group": "h", "colour": "red"}]}, "groups[1].colour"),
])
def test_it_refuses_a_bad_topic(admin_api, body, field):
    expect_error(admin_api.post("/api/v1/topics", body), 400, "invalid_request", field)
    assert not Topic.objects.filter(name="t").exists()


def test_it_answers_409_for_an_existing_topic(admin_api):
    admin_api.post("/api/v1/topics", {"topic": "orders"})
    expect_error(admin_api.post("/api/v1/topics", {"topic": "orders"}), 409, "conflict", "topic")


def test_it_answers_404_for_an_unknown_topic(admin_api):
    for response in (admin_api.get("/api/v1/topics/nope"), admin_api.patch("/api/v1/topics/nope", {"paused": True}),
                     admin_api.delete("/api/v1/topics/nope")):
        expect_error(response, 404, "not_found")


def test_it_refuses_renaming_a_topic(admin_api):
    admin_api.post("/api/v1/topics", {"topic": "orders"})
    expect_error(admin_api.patch("/api/v1/topics/orders", {"topic": "orders2"}), 400, "invalid_request", "topic")


def test_it_deletes_a_topic_only_without_live_messages(admin_api, producer_api, shop):
    admin_api.post("/api/v1/topics", {"topic": "orders", "biz": "shop"})
    [entry] = produce(producer_api, {"topic": "orders", "data": 1})
    expect_error(admin_api.delete("/api/v1/topics/orders"), 409, "conflict")
    assert admin_api.post("/api/v1/messages/delete", {"ids": [entry["id"]]}).json() == {"count": 1}
    assert admin_api.delete("/api/v1/topics/orders").status_code == 204
    assert not Topic.objects.filter(name="orders").exists()


def test_it_lets_a_biz_admin_manage_only_its_own_topics(admin_api, shop_admin_api, shop, other_biz):
    admin_api.post("/api/v1/topics", {"topic": "orders", "biz": "shop"})
    admin_api.post("/api/v1/topics", {"topic": "theirs", "biz": "other"})
    assert [t["topic"] for t in shop_admin_api.get("/api/v1/topics").json()] == ["orders"]
    created = shop_admin_api.post("/api/v1/topics", {"topic": "orders.mine"})
    assert created.status_code == 201 and created.json()["biz"] == "shop"
    # Another line's topics and the line itself answer as ones that do not exist.
    expect_error(shop_admin_api.post("/api/v1/topics", {"topic": "x", "biz": "other"}), 400, "invalid_request", "biz")
    expect_error(shop_admin_api.get("/api/v1/topics/theirs"), 404, "not_found")
    expect_error(shop_admin_api.patch("/api/v1/topics/theirs", {"paused": True}), 404, "not_found")
    expect_error(shop_admin_api.delete("/api/v1/topics/theirs"), 404, "not_found")
    expect_error(shop_admin_api.patch("/api/v1/topics/orders", {"biz": "other"}), 400, "invalid_request", "biz")
    assert Topic.objects.get(name="theirs").paused is False
    assert Topic.objects.get(name="orders").biz_id == shop.id


def test_it_lets_a_consumer_read_but_not_change_its_topic(admin_api, consumer_api):
    admin_api.post("/api/v1/topics", {"topic": "orders", "biz": "shop"})
    admin_api.post("/api/v1/topics", {"topic": "payments", "biz": "shop"})
    assert consumer_api.get("/api/v1/topics/orders").status_code == 200
    expect_error(consumer_api.get("/api/v1/topics/payments"), 403, "forbidden")
    expect_error(consumer_api.patch("/api/v1/topics/orders", {"paused": True}), 403, "forbidden")
    expect_error(consumer_api.get("/api/v1/topics"), 403, "forbidden")


def test_it_refuses_a_patched_group_without_its_name(admin_api):
    admin_api.post("/api/v1/topics", {"topic": "orders"})
    response = admin_api.patch("/api/v1/topics/orders", {"groups": [{"group": "a"}, {"mode": "queue"}]})
    expect_error(response, 400, "invalid_request", "groups[1].group")
