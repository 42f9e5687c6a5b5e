"""Subscriptions on the real database: publishes copied to every group, groups created from
latest / earliest / a time (replaying live and archived history), deleted, paused and
flow-controlled, and the REST doors' answers to bad input."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from messages.archive.models import MessageArchive
from messages.delivery.lifecycle import leases_recover
from messages.models import Message, MessageTrace, Status
from messages.operations.bulk import bulk_job_run
from messages.operations.models import BulkJob
from mqcenter.models import AuditEntry
from tests.support.api import ack, expect_error, produce, pull
from topics.models import Topic, TopicGroup

pytestmark = pytest.mark.django_db


@pytest.fixture
def orders(shop) -> Topic:
    topic = Topic.objects.create(name="orders", biz=shop)
    TopicGroup.objects.create(topic=topic, name="billing")
    TopicGroup.objects.create(topic=topic, name="audit")
    return topic


def copies(topic: str = "orders") -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for group, data in Message.objects.filter(topic=topic).order_by("id").values_list("group_name", "data"):
        found.setdefault(group, []).append(data)
    return found


def test_it_copies_a_publish_to_every_subscribed_group_with_one_publish_id(producer_api, orders):
    entries = produce(producer_api, {"topic": "orders", "data": 1}, {"topic": "orders", "data": 2, "group": "billing"})
    assert [(e["group"], e["duplicate"]) for e in entries] == [("audit", False), ("billing", False), ("billing", False)]
    assert copies() == {"audit": ["1"], "billing": ["1", "2"]}
    publish_ids = set(Message.objects.filter(data="1").values_list("publish_id", flat=True))
    assert len(publish_ids) == 1 and None not in publish_ids
    assert Message.objects.get(data="2").publish_id is None  # point-to-point


def test_broadcast_means_the_same_as_no_group(producer_api, orders):
    entries = produce(producer_api, {"topic": "orders", "data": 1, "broadcast": True})
    assert sorted(e["group"] for e in entries) == ["audit", "billing"]


def test_a_topic_without_groups_keeps_its_publishes_in_default_without_subscribing_it(producer_api, admin_api, shop):
    Topic.objects.create(name="orders.bare", biz=shop)
    [entry] = produce(producer_api, {"topic": "orders.bare", "data": 1})
    assert entry["group"] == "default"
    assert list(TopicGroup.objects.filter(topic__name="orders.bare").values_list("name", "subscribed")) == [
        ("default", False)]
    assert admin_api.post("/api/v1/topics/orders.bare/groups", {"group": "billing"}).status_code == 201
    [entry] = produce(producer_api, {"topic": "orders.bare", "data": 2})
    assert entry["group"] == "billing"
    assert copies("orders.bare") == {"default": ["1"], "billing": ["2"]}


def test_a_message_sent_to_a_named_group_does_not_subscribe_it(producer_api, orders):
    produce(producer_api, {"topic": "orders", "data": 1, "group": "retries"})
    produce(producer_api, {"topic": "orders", "data": 2})
    assert copies() == {"retries": ["1"], "audit": ["2"], "billing": ["2"]}
    assert TopicGroup.objects.get(name="retries").subscribed is False


def test_a_consumer_subscribes_a_group_messages_were_sent_to_and_keeps_them(producer_api, consumer_api, orders):
    produce(producer_api, {"topic": "orders", "data": 1, "group": "retries"})
    assert [m["data"] for m in pull(consumer_api, "orders", group="retries")] == [1]
    produce(producer_api, {"topic": "orders", "data": 2})
    assert copies()["retries"] == ["1", "2"]
    assert TopicGroup.objects.get(name="retries").subscribed is True


def test_creating_a_group_messages_were_sent_to_subscribes_it(admin_api, producer_api, orders):
    produce(producer_api, {"topic": "orders", "data": 1, "group": "retries"})
    response = admin_api.post("/api/v1/topics/orders/groups", {"group": "retries"})
    assert response.status_code == 201, response.content
    assert response.json()["subscribed"] is True and response.json()["backlog"] == 1
    expect_error(admin_api.post("/api/v1/topics/orders/groups", {"group": "retries"}), 409, "conflict")


@override_settings(MQ_AUTO_CREATE_GROUPS=False)
def test_without_auto_creation_a_publish_is_stored_and_a_message_to_an_unknown_group_is_404(producer_api, shop):
    Topic.objects.create(name="orders.bare", biz=shop)
    assert [e["group"] for e in produce(producer_api, {"topic": "orders.bare", "data": 1})] == ["default"]
    response = producer_api.post("/api/v1/messages", {"messages": [{"topic": "orders.bare", "data": 2, "group": "x"}]})
    expect_error(response, 404, "not_found")
    assert copies("orders.bare") == {"default": ["1"]}
    assert list(TopicGroup.objects.values_list("name", "subscribed")) == [("default", False)]


def test_dedup_keys_hold_per_copy(producer_api, orders):
    first = produce(producer_api, {"topic": "orders", "data": 1, "dedup_key": "k"})
    again = produce(producer_api, {"topic": "orders", "data": 1, "dedup_key": "k"})
    assert [e["duplicate"] for e in again] == [True, True]
    assert sorted(e["id"] for e in again) == sorted(e["id"] for e in first)
    assert Message.objects.count() == 2


def test_a_group_created_from_latest_gets_only_later_publishes(admin_api, producer_api, orders):
    produce(producer_api, {"topic": "orders", "data": 1})
    response = admin_api.post("/api/v1/topics/orders/groups", {"group": "late", "start": "latest"})
    assert response.status_code == 201, response.content
    assert response.json()["backlog"] == 0
    produce(producer_api, {"topic": "orders", "data": 2})
    assert copies()["late"] == ["2"]


def test_a_group_created_from_earliest_replays_live_and_archived_history_once(admin_api, producer_api, orders):
    ids = [e["id"] for e in produce(producer_api, *({"topic": "orders", "data": n} for n in range(4)))]
    produce(producer_api, {"topic": "orders", "data": 99, "group": "billing"})  # point-to-point: not replayed
    # One publish fully archived (both copies), one half archived (audit's copy only).
    archive = Message.objects.filter(data__in=["0"]) | Message.objects.filter(data="1", group_name="audit")
    for row in archive:
        fields = {f.attname: getattr(row, f.attname) for f in Message._meta.concrete_fields}
        MessageArchive.objects.create(**fields | {"status": Status.SUCCESS, "archived_at": timezone.now()})
    archive.delete()

    response = admin_api.post("/api/v1/topics/orders/groups", {"group": "replay", "start": "earliest"})

    assert response.status_code == 201, response.content
    replayed = Message.objects.filter(group_name="replay").order_by("id")
    assert [m.data for m in replayed] == ["0", "1", "2", "3"]
    assert all(m.id > max(ids) and m.status == Status.NEW for m in replayed)
    assert len({m.dedup_key for m in replayed}) == 4 and all(m.dedup_key.startswith("mq-replay:") for m in replayed)
    originals = {m.headers["mq-replay-of"] for m in replayed}
    assert len(originals) == 4
    assert response.json()["backlog"] == 4
    # A later publish reaches it once, as every group.
    produce(producer_api, {"topic": "orders", "data": 5})
    assert copies()["replay"] == ["0", "1", "2", "3", "5"]


def archive_all() -> None:
    for row in Message.objects.all():
        fields = {f.attname: getattr(row, f.attname) for f in Message._meta.concrete_fields}
        MessageArchive.objects.create(**fields | {"status": Status.SUCCESS, "archived_at": timezone.now()})
    Message.objects.all().delete()


def test_earliest_replays_history_that_is_all_archived(admin_api, producer_api, orders):
    produce(producer_api, {"topic": "orders", "data": 1}, {"topic": "orders", "data": 2})
    archive_all()
    assert admin_api.post("/api/v1/topics/orders/groups", {"group": "late", "start": "earliest"}).status_code == 201
    assert copies() == {"late": ["1", "2"]}


def test_a_replay_leaves_out_open_transactions_and_cancelled_messages(admin_api, producer_api, orders):
    produce(producer_api, *({"topic": "orders", "data": n} for n in range(3)))
    Message.objects.filter(data="0").update(status=Status.PREPARED)
    Message.objects.filter(data="1").update(status=Status.CANCELLED)
    assert admin_api.post("/api/v1/topics/orders/groups", {"group": "late", "start": "earliest"}).status_code == 201
    assert copies()["late"] == ["2"]


def test_a_replay_copies_a_publish_once_when_its_copies_fall_in_two_batches(admin_api, producer_api, orders,
                                                                          monkeypatch):
    monkeypatch.setattr("messages.operations.replay.REPLAY_BATCH", 1)  # every copy a batch of its own
    produce(producer_api, {"topic": "orders", "data": 1}, {"topic": "orders", "data": 2})
    assert admin_api.post("/api/v1/topics/orders/groups", {"group": "late", "start": "earliest"}).status_code == 201
    assert copies()["late"] == ["1", "2"]


@override_settings(MQ_REDRIVE_SYNC_LIMIT=1)
def test_a_replay_job_worked_twice_at_once_copies_nothing_twice(admin_api, producer_api, orders):
    from messages.operations.replay import replay_batch

    produce(producer_api, {"topic": "orders", "data": 1})
    job_id = admin_api.post("/api/v1/topics/orders/groups", {"group": "late", "start": "earliest"}).json()["job"]
    job = BulkJob.objects.get(id=job_id)
    spec = {"topic": orders, "group": "late", "since": None, "high_water": job.filter["high_water"],
            "actor": "t", "run": f"j{job.id}", "job_id": job.id}
    assert replay_batch(after=0, **spec)[0] == 1
    assert replay_batch(after=0, **spec)[0] == 0  # a second worker that read the same cursor
    assert copies()["late"] == ["1"]


def test_a_group_created_from_a_time_replays_publishes_since_then(admin_api, producer_api, orders):
    produce(producer_api, {"topic": "orders", "data": 1})
    Message.objects.update(add_time=timezone.now() - timedelta(hours=2))
    produce(producer_api, {"topic": "orders", "data": 2})
    since = (timezone.now() - timedelta(hours=1)).isoformat()
    assert admin_api.post("/api/v1/topics/orders/groups", {"group": "recent", "start": since}).status_code == 201
    assert copies()["recent"] == ["2"]


@override_settings(MQ_REDRIVE_SYNC_LIMIT=3)
def test_a_large_replay_is_a_job_with_progress(admin_api, producer_api, orders):
    produce(producer_api, *({"topic": "orders", "data": n} for n in range(5)))
    response = admin_api.post("/api/v1/topics/orders/groups", {"group": "big", "start": "earliest"})
    assert response.status_code == 202, response.content
    job = BulkJob.objects.get(id=response.json()["job"])
    assert job.kind == "replay" and job.total == 10  # copies read: 5 publishes x 2 groups
    bulk_job_run(job_id=job.id)
    job.refresh_from_db()
    assert job.state == "done" and job.processed == 5
    assert copies()["big"] == [str(n) for n in range(5)]


def test_deleting_a_group_removes_its_new_messages_and_stops_its_copies(admin_api, producer_api, consumer_api, orders):
    produce(producer_api, {"topic": "orders", "data": 1}, {"topic": "orders", "data": 2})
    [running] = pull(consumer_api, "orders", group="audit", max_messages=1)
    assert admin_api.delete("/api/v1/topics/orders/groups/audit").status_code == 204
    assert list(Message.objects.filter(group_name="audit").values_list("id", "status")) == [
        (running["id"], Status.CANCELLED)]
    produce(producer_api, {"topic": "orders", "data": 3})
    assert copies()["billing"] == ["1", "2", "3"]
    assert ack(consumer_api, "c1", {"id": running["id"], "status": "SUCCESS"})[0]["outcome"] == "stale"
    expect_error(admin_api.get("/api/v1/topics/orders/groups/audit"), 404, "not_found")


def test_a_deleted_group_leaves_nothing_a_group_of_its_name_sees(admin_api, producer_api, consumer_api, orders):
    produce(producer_api, *({"topic": "orders", "data": n, "retry_count": 0} for n in range(3)))
    leased, failed = pull(consumer_api, "orders", group="audit", consumer="c1", max_messages=2)
    assert ack(consumer_api, "c1", {"id": failed["id"], "status": "FAIL"})[0]["outcome"] == "failed"
    assert admin_api.delete("/api/v1/topics/orders/groups/audit").status_code == 204
    ended = dict(Message.objects.filter(group_name="audit").values_list("id", "status"))
    assert ended == {leased["id"]: Status.CANCELLED, failed["id"]: Status.CANCELLED}
    for message_id in ended:
        last = MessageTrace.objects.filter(message_id=message_id).order_by("id").last()
        assert (last.event, last.status_after, last.log) == ("cancelled", Status.CANCELLED, "group audit deleted")
    # Its lease passing changes nothing: the row is no longer RUNNING.
    Message.objects.filter(id=leased["id"]).update(lease_expires_at=timezone.now() - timedelta(hours=1))
    leases_recover()
    assert Message.objects.get(id=leased["id"]).status == Status.CANCELLED

    status = admin_api.post("/api/v1/topics/orders/groups", {"group": "audit", "start": "latest"}).json()
    assert (status["backlog"], status["in_flight"], status["dead"]) == (0, 0, 0)
    assert pull(consumer_api, "orders", group="audit", consumer="c2", max_messages=10) == []


def test_a_group_re_created_before_its_predecessors_rows_are_ended_ends_them_first(
    admin_api, producer_api, consumer_api, orders, monkeypatch,
):
    produce(producer_api, {"topic": "orders", "data": 1})
    [leased] = pull(consumer_api, "orders", group="audit", consumer="c1")
    # The delete's batches not run yet: only its group row is gone.
    monkeypatch.setattr("messages.subscriptions._leftovers_end", lambda *args, **kwargs: 0)
    assert admin_api.delete("/api/v1/topics/orders/groups/audit").status_code == 204
    monkeypatch.undo()
    assert Message.objects.get(id=leased["id"]).status == Status.RUNNING
    status = admin_api.post("/api/v1/topics/orders/groups", {"group": "audit"}).json()
    assert (status["backlog"], status["in_flight"]) == (0, 0)
    assert Message.objects.get(id=leased["id"]).status == Status.CANCELLED


def test_a_paused_group_answers_empty_until_resumed(admin_api, producer_api, consumer_api, orders):
    produce(producer_api, {"topic": "orders", "data": 1})
    assert admin_api.patch("/api/v1/topics/orders/groups/billing", {"paused": True}).json()["paused"] is True
    assert pull(consumer_api, "orders", group="billing") == []
    assert len(pull(consumer_api, "orders", group="audit")) == 1  # other groups go on
    admin_api.patch("/api/v1/topics/orders/groups/billing", {"paused": False})
    assert len(pull(consumer_api, "orders", group="billing")) == 1


def test_max_in_flight_caps_running_messages_of_the_group(admin_api, producer_api, consumer_api, orders):
    admin_api.patch("/api/v1/topics/orders/groups/billing", {"max_in_flight": 2})
    produce(producer_api, *({"topic": "orders", "data": n} for n in range(5)))
    first = pull(consumer_api, "orders", group="billing", consumer="c1", max_messages=10)
    assert len(first) == 2
    assert pull(consumer_api, "orders", group="billing", consumer="c2", max_messages=10) == []
    ack(consumer_api, "c1", {"id": first[0]["id"], "status": "SUCCESS"})
    assert len(pull(consumer_api, "orders", group="billing", consumer="c2", max_messages=10)) == 1


def test_rate_per_second_takes_no_more_than_the_bucket(admin_api, producer_api, consumer_api, orders):
    admin_api.patch("/api/v1/topics/orders/groups/billing", {"rate_per_second": 30})  # a bucket of 3
    produce(producer_api, *({"topic": "orders", "data": n} for n in range(10)))
    assert len(pull(consumer_api, "orders", group="billing", max_messages=10)) == 3
    TopicGroup.objects.filter(name="billing").update(rate_refilled_at=timezone.now() - timedelta(seconds=1))
    assert len(pull(consumer_api, "orders", group="billing", max_messages=10)) == 3  # refilled, capped


def test_key_concurrency_lets_that_many_of_one_key_run(admin_api, producer_api, consumer_api, orders):
    admin_api.patch("/api/v1/topics/orders/groups/billing", {"mode": "sharded", "key_concurrency": 2})
    produce(producer_api, *({"topic": "orders", "data": n, "key": "k", "group": "billing"} for n in range(4)))
    assert [m["data"] for m in pull(consumer_api, "orders", group="billing", max_messages=10)] == [0, 1]
    assert pull(consumer_api, "orders", group="billing", consumer="c2", max_messages=10) == []


def test_the_group_page_reports_its_state(admin_api, producer_api, consumer_api, orders):
    produce(producer_api, *({"topic": "orders", "data": n} for n in range(3)))
    pull(consumer_api, "orders", group="billing", max_messages=1)
    body = admin_api.get("/api/v1/topics/orders/groups/billing").json()
    assert (body["backlog"], body["in_flight"], body["dead"]) == (2, 1, 0)
    assert body["oldest_age_seconds"] >= 0 and body["last_pull_at"] is not None
    assert {g["group"] for g in consumer_api.get("/api/v1/topics/orders/groups").json()} == {"audit", "billing"}


@pytest.mark.parametrize(("body", "field"), [
    ({"group": "x", "start": "2999-01-01T00:00:00Z"}, "start"),
    ({"group": "x", "start": "yesterday"}, "start"),
    ({"group": "x", "rate_per_second": -1}, "rate_per_second"),
    ({"group": "x", "rate_per_second": 1e-12}, "rate_per_second"),
    ({"group": "x", "rate_per_second": 100001}, "rate_per_second"),
    ({"group": "x", "max_in_flight": 0}, "max_in_flight"),
    ({"group": "x", "key_concurrency": 0}, "key_concurrency"),
    ({"group": "x", "mode": "fifo"}, "mode"),
    ({"group": "x", "colour": "red"}, "colour"),
    ({"group": "bad name"}, "group"),
])
def test_it_refuses_bad_group_settings_and_creates_nothing(admin_api, orders, body, field):
    expect_error(admin_api.post("/api/v1/topics/orders/groups", body), 400, "invalid_request", field)
    expect_error(admin_api.patch("/api/v1/topics/orders/groups/billing", {k: v for k, v in body.items()
                                                                          if k not in ("group", "start")} or {"x": 1}),
                 400, "invalid_request")
    assert set(TopicGroup.objects.values_list("name", flat=True)) == {"audit", "billing"}
    billing = TopicGroup.objects.get(name="billing")
    assert (billing.mode, billing.max_in_flight, billing.rate_per_second) == ("queue", None, None)


def test_unknown_groups_are_404_and_a_taken_name_409(admin_api, orders):
    expect_error(admin_api.patch("/api/v1/topics/orders/groups/nope", {"paused": True}), 404, "not_found")
    expect_error(admin_api.delete("/api/v1/topics/orders/groups/nope"), 404, "not_found")
    expect_error(admin_api.post("/api/v1/topics/orders/groups", {"group": "billing"}), 409, "conflict")


def test_a_group_created_on_a_missing_topic_creates_the_topic_as_a_produce_does(shop_admin_api, shop):
    response = shop_admin_api.post("/api/v1/topics/invoices/groups", {"group": "billing", "mode": "serial"})
    assert response.status_code == 201, response.content
    assert (response.json()["topic"], response.json()["mode"]) == ("invoices", "serial")
    topic = Topic.objects.get(name="invoices")
    assert topic.biz_id == shop.pk  # the token's line, as a produce's auto-created topic
    assert list(topic.groups.values_list("name", "subscribed")) == [("billing", True)]


def test_a_refused_group_on_a_missing_topic_creates_no_topic(shop_admin_api):
    expect_error(shop_admin_api.post("/api/v1/topics/invoices/groups", {"group": "billing", "mode": "fifo"}),
                 400, "invalid_request", "mode")
    expect_error(shop_admin_api.post("/api/v1/topics/invoices/groups", {"group": "bad name"}),
                 400, "invalid_request", "group")
    expect_error(shop_admin_api.post("/api/v1/topics/bad%20name/groups", {"group": "billing"}), 404, "not_found")
    expect_error(shop_admin_api.post("/api/v1/topics/invoices/groups",
                                     {"group": "billing", "filter": {"expression": "tag IN ("}}),
                 400, "invalid_request", "filter.expression")
    assert not Topic.objects.exists()


@override_settings(MQ_AUTO_CREATE_TOPICS=False)
def test_without_topic_auto_creation_a_group_on_a_missing_topic_is_404(admin_api):
    expect_error(admin_api.post("/api/v1/topics/nope/groups", {"group": "x"}), 404, "not_found")
    assert not Topic.objects.exists()


def test_another_business_line_cannot_see_or_change_the_groups(outsider_api, orders):
    expect_error(outsider_api.get("/api/v1/topics/orders/groups/billing"), 404, "not_found")
    expect_error(outsider_api.patch("/api/v1/topics/orders/groups/billing", {"paused": True}), 404, "not_found")
    assert TopicGroup.objects.get(name="billing").paused is False


@override_settings(MQ_AUTO_CREATE_GROUPS=False)
def test_without_auto_creation_a_pull_of_an_unknown_group_is_404(consumer_api, orders):
    response = consumer_api.post("/api/v1/pull", {"topic": "orders", "group": "ghost", "consumer": "c1"})
    expect_error(response, 404, "not_found")
    assert not TopicGroup.objects.filter(name="ghost").exists()


def test_it_manages_and_audits_the_groups_of_a_topic_with_a_long_name(admin_api, shop):
    name = "t" * 100  # with a long group name, more than an audit entry's target columns hold
    Topic.objects.create(name=name, biz=shop)
    base = f"/api/v1/topics/{name}/groups"
    assert admin_api.post(base, {"group": "g" * 100, "start": "earliest"}).status_code == 201
    assert admin_api.patch(f"{base}/{'g' * 100}", {"paused": True}).status_code == 200
    since = (timezone.now() - timedelta(minutes=1)).isoformat()
    assert admin_api.post(f"{base}/{'g' * 100}/replay", {"since": since}).status_code == 200
    assert admin_api.delete(f"{base}/{'g' * 100}").status_code == 204
    entries = AuditEntry.objects.filter(action__startswith="group.").order_by("id")
    assert [e.action for e in entries] == ["group.create", "group.update", "group.replay", "group.delete"]
    assert {((e.after or e.before)["topic"], (e.after or e.before)["group"]) for e in entries} == {(name, "g" * 100)}
    assert {e.target_type for e in entries} == {"TopicGroup"}


def test_a_publish_that_lands_in_default_says_so_in_the_answer_and_the_console(
    producer_api, admin_api, shop, client, django_user_model,
):
    Topic.objects.create(name="orders.bare", biz=shop)
    response = producer_api.post("/api/v1/messages", {"messages": [
        {"topic": "orders.bare", "data": 1}, {"topic": "orders.bare", "data": 2},
        {"topic": "orders.bare", "group": "named", "data": 3}]})
    assert response.status_code == 201, response.content
    [note] = response.json()["notes"]
    assert (note["code"], note["topic"], note["group"], note["count"]) == ("no_subscriber", "orders.bare", "default", 2)
    assert "/api/v1/messages/move" in note["message"]
    # A named group's message or a publish with a subscriber carries no note.
    assert "notes" not in producer_api.post("/api/v1/messages", {"messages": [
        {"topic": "orders.bare", "group": "named", "data": 4}]}).json()
    assert admin_api.post("/api/v1/topics/orders.bare/groups", {"group": "billing"}).status_code == 201
    assert "notes" not in produce_answer(producer_api, {"topic": "orders.bare", "data": 5})

    client.force_login(django_user_model.objects.create_superuser("boss", password="pw-123456789"))
    page = client.get("/topics/orders.bare/").content.decode()
    assert "2 messages published while no group was subscribed wait in group <strong>default</strong>" in page
    assert "?topic=orders.bare&amp;group=default&amp;status=NEW" in page
    # The console's own produce says it too.
    Topic.objects.create(name="orders.empty", biz=shop)
    added = client.post("/messages/add/", {"topic": "orders.empty", "data": "{}"})
    assert added.status_code == 303, added.content
    shown = client.get(added["Location"]).content.decode()
    assert "No group is subscribed to topic orders.empty" in shown


def produce_answer(api, *items):
    response = api.post("/api/v1/messages", {"messages": list(items)})
    assert response.status_code == 201, response.content
    return response.json()
