"""Registry: consumer heartbeats with rank/total, leave, the online list, broker nodes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from registry.models import BrokerNode, ConsumerInstance
from registry.services import broker_heartbeat
from tests.support.api import expect_error
from topics.models import TopicGroup

pytestmark = pytest.mark.django_db


def heartbeat(api, consumer, *subscriptions):
    response = api.post("/api/v1/registry/consumers", {
        "consumer": consumer, "subscriptions": [{"topic": t, "group": g} for t, g in subscriptions]})
    assert response.status_code == 200, response.content
    return response.json()


def test_it_places_consumers_by_id_with_rank_and_total(consumer_api):
    heartbeat(consumer_api, "host-b:2:y", ("orders", "billing"))
    heartbeat(consumer_api, "host-c:3:z", ("orders", "billing"))
    body = heartbeat(consumer_api, "host-a:1:x", ("orders", "billing"), ("orders", "audit"))
    assert body["heartbeat_seconds"] > 0 and isinstance(body["brokers"], list)
    assert body["subscriptions"] == [
        {"topic": "orders", "group": "billing", "mode": "queue", "rank": 0, "total": 3},
        {"topic": "orders", "group": "audit", "mode": "queue", "rank": 0, "total": 1},
    ]
    again = heartbeat(consumer_api, "host-c:3:z", ("orders", "billing"))
    assert again["subscriptions"][0]["rank"] == 2 and again["subscriptions"][0]["total"] == 3
    assert TopicGroup.objects.filter(topic__name="orders", name="audit").exists()


def test_it_drops_consumers_that_missed_three_heartbeats(consumer_api, settings):
    heartbeat(consumer_api, "host-a:1:x", ("orders", "g"))
    heartbeat(consumer_api, "host-b:1:x", ("orders", "g"))
    old = timezone.now() - timedelta(seconds=3 * settings.MQ_HEARTBEAT_SECONDS + 5)
    ConsumerInstance.objects.filter(consumer="host-a:1:x").update(last_heartbeat=old)
    body = heartbeat(consumer_api, "host-b:1:x", ("orders", "g"))
    assert body["subscriptions"][0]["rank"] == 0 and body["subscriptions"][0]["total"] == 1


def test_it_replaces_a_consumer_s_subscriptions(consumer_api):
    heartbeat(consumer_api, "c1", ("orders", "a"), ("orders", "b"))
    heartbeat(consumer_api, "c1", ("orders", "b"))
    assert set(ConsumerInstance.objects.filter(consumer="c1").values_list("group_name", flat=True)) == {"b"}


def test_it_lists_online_consumers_filtered_by_topic_and_group(consumer_api, admin_api):
    heartbeat(consumer_api, "c1", ("orders", "a"))
    heartbeat(consumer_api, "c2", ("orders", "a"), ("orders.eu", "b"))
    response = consumer_api.get("/api/v1/registry/consumers", {"topic": "orders", "group": "a"})
    assert response.status_code == 200
    rows = response.json()
    assert [(r["consumer"], r["rank"], r["total"]) for r in rows] == [("c1", 0, 2), ("c2", 1, 2)]
    everything = admin_api.get("/api/v1/registry/consumers").json()
    assert {(r["consumer"], r["topic"], r["group"]) for r in everything} == {
        ("c1", "orders", "a"), ("c2", "orders", "a"), ("c2", "orders.eu", "b")}


def test_it_removes_a_consumer_that_leaves(consumer_api):
    heartbeat(consumer_api, "c1", ("orders", "a"))
    heartbeat(consumer_api, "c2", ("orders", "a"))
    response = consumer_api.delete("/api/v1/registry/consumers/c1")
    assert response.status_code == 204
    assert not ConsumerInstance.objects.filter(consumer="c1").exists()
    assert heartbeat(consumer_api, "c2", ("orders", "a"))["subscriptions"][0]["total"] == 1


def test_it_refuses_leave_for_a_consumer_of_another_scope(consumer_api, shop):
    from tests.conftest import make_api

    heartbeat(consumer_api, "c1", ("orders", "a"))
    other = make_api(["consume:payments"], shop)
    expect_error(other.delete("/api/v1/registry/consumers/c1"), 403, "forbidden")
    assert ConsumerInstance.objects.filter(consumer="c1").exists()


def test_it_refuses_a_bad_consumer_id_in_the_path(consumer_api):
    expect_error(consumer_api.delete("/api/v1/registry/consumers/a%20b"), 400, "invalid_request", "consumer")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"subscriptions": []}, "consumer"),
        ({"consumer": "c1"}, "subscriptions"),
        ({"consumer": "c1", "subscriptions": {}}, "subscriptions"),
        ({"consumer": "c1", "subscriptions": ["orders"]}, "subscriptions[0]"),
        ({"consumer": "c1", "subscriptions": [{"topic": "orders"}, {"topic": "bad topic"}]}, "subscriptions[1].topic"),
        ({"consumer": "c1", "subscriptions": [{"topic": "orders", "group": ""}]}, "subscriptions[0].group"),
    ],
)
def test_it_refuses_a_bad_heartbeat(consumer_api, body, field):
    expect_error(consumer_api.post("/api/v1/registry/consumers", body), 400, "invalid_request", field)


def test_it_refuses_a_heartbeat_outside_the_consume_scope(consumer_api):
    response = consumer_api.post("/api/v1/registry/consumers", {
        "consumer": "c1", "subscriptions": [{"topic": "orders"}, {"topic": "payments"}]})
    expect_error(response, 403, "forbidden", "subscriptions[1].topic")
    assert not ConsumerInstance.objects.exists()


def test_it_lists_live_brokers_only(consumer_api):
    broker_heartbeat(node_id="n1", url="http://10.0.0.5:8000", host="h1", pid=1)
    broker_heartbeat(node_id="n2", url="http://10.0.0.6:8000", host="h2", pid=2)
    BrokerNode.objects.filter(node_id="n2").update(last_heartbeat=timezone.now() - timedelta(hours=1))
    response = consumer_api.get("/api/v1/registry/brokers")
    assert response.status_code == 200
    assert [(b["node_id"], b["url"]) for b in response.json()] == [("n1", "http://10.0.0.5:8000")]
    assert heartbeat(consumer_api, "c1", ("orders", "a"))["brokers"] == ["http://10.0.0.5:8000"]


def test_a_consumer_id_is_scoped_by_business_line(consumer_api, outsider_api, admin_api, other_biz):
    # Both lines run a consumer "shared-id": neither squats, replaces, removes or sees the
    # other's entries, and neither learns the other's exist.
    admin_api.post("/api/v1/topics", {"topic": "elsewhere", "biz": "other"})
    mine = {"consumer": "shared-id", "subscriptions": [{"topic": "orders", "group": "billing"}]}
    assert consumer_api.post("/api/v1/registry/consumers", mine).status_code == 200

    theirs = outsider_api.post("/api/v1/registry/consumers", {
        "consumer": "shared-id", "subscriptions": [{"topic": "elsewhere", "group": "g"}]})
    assert theirs.status_code == 200, theirs.content
    assert theirs.json()["subscriptions"][0] | {"rank": 0, "total": 1} == theirs.json()["subscriptions"][0]
    emptied = outsider_api.post("/api/v1/registry/consumers", {"consumer": "shared-id", "subscriptions": []})
    assert emptied.status_code == 200
    assert outsider_api.delete("/api/v1/registry/consumers/shared-id").status_code == 204

    assert list(ConsumerInstance.objects.filter(consumer="shared-id").values_list("topic", "group_name")) == [
        ("orders", "billing")]
    assert consumer_api.post("/api/v1/registry/consumers", mine).status_code == 200
    assert [c["consumer"] for c in outsider_api.get("/api/v1/registry/consumers").json()] == []
