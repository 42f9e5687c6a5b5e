"""Pull, ack, extend and release: delivery modes, retry policies, stale answers."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from messages.models import Message, MessageTrace
from messages.selectors import message_trace
from tests.support.api import ack, expect_error, parse_time, produce, pull

pytestmark = pytest.mark.django_db


def make_topic(api, name="orders", **settings):
    response = api.post("/api/v1/topics", {"topic": name, "biz": "shop", **settings})
    assert response.status_code == 201, response.content
    return response.json()


# --- pull ---------------------------------------------------------------------------------


def test_it_claims_up_to_max_messages_in_order_and_leases_them(producer_api, consumer_api):
    ids = [e["id"] for e in produce(producer_api, *({"topic": "orders", "data": i} for i in range(5)))]
    first = pull(consumer_api, "orders", consumer="c1", max_messages=3)
    assert [m["id"] for m in first] == ids[:3]
    assert all(m["attempt"] == 1 for m in first)
    rows = Message.objects.filter(id__in=ids[:3])
    assert {(r.status, r.lease_owner) for r in rows} == {("RUNNING", "c1")}
    rest = pull(consumer_api, "orders", consumer="c2", max_messages=10)
    assert [m["id"] for m in rest] == ids[3:]
    assert pull(consumer_api, "orders", consumer="c3") == []


def test_it_returns_an_empty_list_when_a_short_wait_ends(consumer_api):
    assert pull(consumer_api, "orders", wait_seconds=0.3) == []


def test_it_records_who_pulled_in_the_trace(producer_api, consumer_api):
    [entry] = produce(producer_api, {"topic": "orders", "data": 1})
    pull(consumer_api, "orders", consumer="host-a:1:x")
    message = Message.objects.get(id=entry["id"])
    [pulled] = [event for event in message_trace(message) if event.event == "pulled"]
    assert pulled.actor == "host-a:1:x" and pulled.attempt == 1 and pulled.at == message.pulled_at
    # The message row holds it: no trace row is written for a claim's pull.
    assert not MessageTrace.objects.filter(message_id=entry["id"]).exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"group": "g", "consumer": "c"}, "topic"),
        ({"topic": "orders", "consumer": "c", "group": "bad group"}, "group"),
        ({"topic": "orders"}, "consumer"),
        ({"topic": "orders", "consumer": "bad consumer id"}, "consumer"),
        ({"topic": "orders", "consumer": "c", "max_messages": 0}, "max_messages"),
        ({"topic": "orders", "consumer": "c", "max_messages": 501}, "max_messages"),
        ({"topic": "orders", "consumer": "c", "max_messages": "5"}, "max_messages"),
        ({"topic": "orders", "consumer": "c", "wait_seconds": -1}, "wait_seconds"),
        ({"topic": "orders", "consumer": "c", "wait_seconds": 31}, "wait_seconds"),
        ({"topic": "orders", "consumer": "c", "wait_seconds": "1"}, "wait_seconds"),
    ],
)
def test_it_refuses_a_bad_pull_naming_the_field(consumer_api, body, field):
    expect_error(consumer_api.post("/api/v1/pull", body), 400, "invalid_request", field)


def test_it_accepts_the_wait_and_batch_bounds(consumer_api):
    with override_settings(MQ_MAX_WAIT_SECONDS=30):
        response = consumer_api.post("/api/v1/pull", {"topic": "orders", "consumer": "c", "max_messages": 500,
                                                       "wait_seconds": 0})
    assert response.status_code == 200 and response.json() == {"messages": []}


def test_it_refuses_pull_outside_the_consume_scope(producer_api, consumer_api):
    response = consumer_api.post("/api/v1/pull", {"topic": "payments", "consumer": "c"})
    expect_error(response, 403, "forbidden")
    expect_error(producer_api.post("/api/v1/pull", {"topic": "orders", "consumer": "c"}), 403, "forbidden")


def test_it_hands_out_one_message_at_a_time_in_serial_mode(admin_api, producer_api, consumer_api):
    make_topic(admin_api, groups=[{"group": "g", "mode": "serial"}])
    ids = [e["id"] for e in produce(producer_api, *({"topic": "orders", "group": "g", "data": i} for i in range(3)))]
    [first] = pull(consumer_api, "orders", group="g", consumer="c1", max_messages=10)
    assert first["id"] == ids[0]
    assert pull(consumer_api, "orders", group="g", consumer="c2", max_messages=10) == []
    assert ack(consumer_api, "c1", {"id": ids[0], "status": "SUCCESS"})[0]["outcome"] == "success"
    [second] = pull(consumer_api, "orders", group="g", consumer="c2", max_messages=10)
    assert second["id"] == ids[1]


def test_it_keeps_one_key_in_order_and_runs_keys_in_parallel_when_sharded(admin_api, producer_api, consumer_api):
    make_topic(admin_api, groups=[{"group": "g", "mode": "sharded"}])
    a1, a2, b1, _b2 = (e["id"] for e in produce(
        producer_api,
        {"topic": "orders", "group": "g", "key": "a", "data": 1},
        {"topic": "orders", "group": "g", "key": "a", "data": 2},
        {"topic": "orders", "group": "g", "key": "b", "data": 3},
        {"topic": "orders", "group": "g", "key": "b", "data": 4},
    ))
    got = pull(consumer_api, "orders", group="g", consumer="c1", max_messages=10)
    assert sorted(m["id"] for m in got) == [a1, b1]
    assert pull(consumer_api, "orders", group="g", consumer="c2", max_messages=10) == []
    ack(consumer_api, "c1", {"id": a1, "status": "SUCCESS"})
    assert [m["id"] for m in pull(consumer_api, "orders", group="g", consumer="c2", max_messages=10)] == [a2]


def test_it_reports_group_modes_on_the_topic(admin_api, consumer_api):
    make_topic(admin_api, groups=[{"group": "g", "mode": "sharded"}])
    response = consumer_api.get("/api/v1/topics/orders")
    assert response.status_code == 200
    assert {"group": "g", "mode": "sharded"} in response.json()["groups"]


# --- ack ----------------------------------------------------------------------------------


def test_it_acks_success_and_a_repeat_is_harmless(producer_api, consumer_api):
    [entry] = produce(producer_api, {"topic": "orders", "data": 1})
    pull(consumer_api, "orders", consumer="c1")
    assert ack(consumer_api, "c1", {"id": entry["id"], "status": "SUCCESS", "log": "done"}) == [
        {"id": entry["id"], "outcome": "success"}]
    assert ack(consumer_api, "c1", {"id": entry["id"], "status": "SUCCESS"}) == [
        {"id": entry["id"], "outcome": "success"}]
    row = Message.objects.get(id=entry["id"])
    assert row.status == "SUCCESS" and row.last_log == "done"
    assert MessageTrace.objects.filter(message_id=row.id, event="acked").count() == 1


def test_a_first_delivery_success_writes_no_trace_row_and_a_repeat_still_answers_success(producer_api, consumer_api):
    [entry] = produce(producer_api, {"topic": "orders", "data": 1})
    pull(consumer_api, "orders", consumer="c1")
    for _ in range(2):
        assert ack(consumer_api, "c1", {"id": entry["id"], "status": "SUCCESS"}) == [
            {"id": entry["id"], "outcome": "success"}]
    assert ack(consumer_api, "c2", {"id": entry["id"], "status": "SUCCESS"}) == [
        {"id": entry["id"], "outcome": "stale"}]
    row = Message.objects.get(id=entry["id"])
    assert list(MessageTrace.objects.filter(message_id=row.id).values_list("event", "actor")) == [("stale_ack", "c2")]
    assert [(e.event, e.actor, e.attempt, e.status_after, e.at) for e in message_trace(row)] == [
        ("produced", row.producer, 0, "NEW", row.add_time), ("pulled", "c1", 1, "RUNNING", row.pulled_at),
        ("acked", "c1", 1, "SUCCESS", row.update_time), ("stale_ack", "c2", 1, "SUCCESS",
                                                         MessageTrace.objects.get(message_id=row.id).at)]


def test_it_answers_one_outcome_per_result_in_order(producer_api, consumer_api):
    a, b = (e["id"] for e in produce(producer_api, {"topic": "orders", "data": 1},
                                     {"topic": "orders", "data": 2, "retry_count": 0}))
    pull(consumer_api, "orders", consumer="c1", max_messages=2)
    outcomes = ack(consumer_api, "c1", {"id": b, "status": "FAIL"}, {"id": a, "status": "SUCCESS"},
                   {"id": 999999999, "status": "SUCCESS"})
    assert [(o["id"], o["outcome"]) for o in outcomes] == [(b, "failed"), (a, "success"), (999999999, "stale")]


def test_it_dead_letters_a_failure_without_retries(producer_api, consumer_api):
    [entry] = produce(producer_api, {"topic": "orders", "data": 1, "retry_count": 0})
    pull(consumer_api, "orders", consumer="c1")
    assert ack(consumer_api, "c1", {"id": entry["id"], "status": "FAIL", "log": "boom"})[0]["outcome"] == "failed"
    row = Message.objects.get(id=entry["id"])
    assert row.status == "FAIL" and row.last_log == "boom"
    assert ack(consumer_api, "c1", {"id": entry["id"], "status": "FAIL"})[0]["outcome"] == "failed"


def test_it_fails_at_once_when_the_consumer_says_retry_false(producer_api, consumer_api):
    [entry] = produce(producer_api, {"topic": "orders", "data": 1, "retry_count": 5})
    pull(consumer_api, "orders", consumer="c1")
    assert ack(consumer_api, "c1", {"id": entry["id"], "status": "FAIL", "retry": False})[0]["outcome"] == "failed"
    row = Message.objects.get(id=entry["id"])
    assert row.status == "FAIL" and row.retry_remaining == 5


@pytest.mark.parametrize(
    ("strategy", "attempt", "low", "high"),
    [
        ("fixed", 1, 10, 10), ("fixed", 3, 10, 10),
        ("linear", 1, 10, 10), ("linear", 3, 30, 30),
        ("exponential", 1, 10, 10), ("exponential", 3, 40, 40),
        ("random", 1, 5, 15), ("random", 3, 5, 15),
    ],
)
def test_it_schedules_a_retry_by_the_topic_strategy(admin_api, producer_api, consumer_api, strategy, attempt, low, high):
    make_topic(admin_api, retry_count=5, retry_strategy=strategy, retry_interval_seconds=10)
    [entry] = produce(producer_api, {"topic": "orders", "data": 1})
    for n in range(attempt):
        Message.objects.filter(id=entry["id"]).update(effect_time=timezone.now() - timedelta(seconds=1))
        [m] = pull(consumer_api, "orders", consumer="c1")
        assert m["attempt"] == n + 1
        before = timezone.now()
        [outcome] = ack(consumer_api, "c1", {"id": entry["id"], "status": "FAIL"})
        after = timezone.now()
        assert outcome["outcome"] == "retry_scheduled"
    effect = parse_time(outcome["effect_time"])
    assert before + timedelta(seconds=low) - timedelta(seconds=0.01) <= effect <= after + timedelta(seconds=high)
    row = Message.objects.get(id=entry["id"])
    assert row.status == "NEW" and row.retry_remaining == 5 - attempt
    assert pull(consumer_api, "orders", consumer="c1") == []  # not before its effect_time


def test_it_answers_stale_when_the_message_is_not_held(producer_api, consumer_api):
    [entry] = produce(producer_api, {"topic": "orders", "data": 1})
    assert ack(consumer_api, "c1", {"id": entry["id"], "status": "SUCCESS"})[0]["outcome"] == "stale"
    pull(consumer_api, "orders", consumer="c1")
    assert ack(consumer_api, "c2", {"id": entry["id"], "status": "SUCCESS"})[0]["outcome"] == "stale"
    assert Message.objects.get(id=entry["id"]).status == "RUNNING"
    assert MessageTrace.objects.filter(message_id=entry["id"], event="stale_ack").count() == 2


def test_a_retried_stale_ack_leaves_one_trace_row(producer_api, consumer_api):
    [entry] = produce(producer_api, {"topic": "orders", "data": 1})
    pull(consumer_api, "orders", consumer="c1")
    for _ in range(5):
        assert ack(consumer_api, "c2", {"id": entry["id"], "status": "SUCCESS"})[0]["outcome"] == "stale"
    assert ack(consumer_api, "c3", {"id": entry["id"], "status": "FAIL"})[0]["outcome"] == "stale"
    assert ack(consumer_api, "c2", {"id": entry["id"], "status": "SUCCESS"})[0]["outcome"] == "stale"
    stale = MessageTrace.objects.filter(message_id=entry["id"], event="stale_ack").order_by("id")
    assert [t.actor for t in stale] == ["c2", "c3", "c2"]
    # The holder's own ack still lands, and repeating it still answers its first outcome.
    assert ack(consumer_api, "c1", {"id": entry["id"], "status": "SUCCESS"})[0]["outcome"] == "success"
    assert ack(consumer_api, "c1", {"id": entry["id"], "status": "SUCCESS"})[0]["outcome"] == "success"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"results": [{"id": 1, "status": "SUCCESS"}]}, "consumer"),
        ({"consumer": "c"}, "results"),
        ({"consumer": "c", "results": []}, "results"),
        ({"consumer": "c", "results": [{"id": 1, "status": "OK"}]}, "results[0].status"),
        ({"consumer": "c", "results": [{"id": 1, "status": "SUCCESS"}, {"id": "2", "status": "SUCCESS"}]}, "results[1].id"),
        ({"consumer": "c", "results": [{"id": 0, "status": "SUCCESS"}]}, "results[0].id"),
        ({"consumer": "c", "results": [{"id": 1, "status": "FAIL", "retry": "no"}]}, "results[0].retry"),
        ({"consumer": "c", "results": [{"id": 1, "status": "FAIL", "log": 5}]}, "results[0].log"),
        ({"consumer": "c", "results": [{"id": 1, "status": "FAIL", "log": {}}]}, "results[0].log"),
        ({"consumer": "c", "results": [{"id": 1, "status": "FAIL", "log": False}]}, "results[0].log"),
        ({"consumer": "c", "results": ["x"]}, "results[0]"),
    ],
)
def test_it_refuses_a_bad_ack_naming_the_field(consumer_api, body, field):
    expect_error(consumer_api.post("/api/v1/ack", body), 400, "invalid_request", field)


def test_it_refuses_an_ack_outside_the_consume_scope(admin_api, producer_api, consumer_api, shop):
    from tests.conftest import make_api

    [entry] = produce(producer_api, {"topic": "orders", "data": 1})
    pull(consumer_api, "orders", consumer="c1")
    other = make_api(["consume:payments"], shop)
    expect_error(other.post("/api/v1/ack", {"consumer": "c1", "results": [{"id": entry["id"], "status": "SUCCESS"}]}),
                 403, "forbidden", "results[0].id")
    assert Message.objects.get(id=entry["id"]).status == "RUNNING"


# --- extend and release -------------------------------------------------------------------


# --- acks carried by a pull (an extension of API.md) -----------------------------------------


def test_a_pull_carries_acks_applies_them_first_and_answers_their_outcomes(producer_api, consumer_api):
    ids = [e["id"] for e in produce(producer_api, *({"topic": "orders", "data": i, "retry_count": 0} for i in range(3)))]
    held = pull(consumer_api, "orders", consumer="c1", max_messages=2)
    response = consumer_api.post("/api/v1/pull", {
        "topic": "orders", "consumer": "c1", "max_messages": 10,
        "results": [{"id": held[0]["id"], "status": "SUCCESS"}, {"id": held[1]["id"], "status": "FAIL", "log": "no"}],
    })
    assert response.status_code == 200, response.content
    answer = response.json()
    assert [m["id"] for m in answer["messages"]] == ids[2:]
    assert [(r["id"], r["outcome"]) for r in answer["results"]] == [(ids[0], "success"), (ids[1], "failed")]
    assert dict(Message.objects.filter(id__in=ids).values_list("id", "status")) == {
        ids[0]: "SUCCESS", ids[1]: "FAIL", ids[2]: "RUNNING"}
    assert not MessageTrace.objects.filter(message_id=ids[0], event="acked").exists()  # its row holds it
    row = Message.objects.get(id=ids[0])
    assert [(e.event, e.actor) for e in message_trace(row)][-1] == ("acked", "c1")


def test_a_pull_that_carries_no_acks_answers_as_before(producer_api, consumer_api):
    response = consumer_api.post("/api/v1/pull", {"topic": "orders", "consumer": "c1", "results": []})
    assert response.status_code == 200 and response.json() == {"messages": []}


def test_a_pull_with_a_bad_ack_acks_nothing_and_claims_nothing(producer_api, consumer_api):
    ids = [e["id"] for e in produce(producer_api, *({"topic": "orders", "data": i} for i in range(2)))]
    [held] = pull(consumer_api, "orders", consumer="c1", max_messages=1)
    response = consumer_api.post("/api/v1/pull", {
        "topic": "orders", "consumer": "c1",
        "results": [{"id": held["id"], "status": "SUCCESS"}, {"id": held["id"], "status": "DONE"}],
    })
    expect_error(response, 400, "invalid_request", "results[1].status")
    assert dict(Message.objects.filter(id__in=ids).values_list("id", "status")) == {ids[0]: "RUNNING", ids[1]: "NEW"}


def test_a_pull_refused_for_its_topic_acks_nothing(producer_api, consumer_api):
    [entry] = produce(producer_api, {"topic": "orders", "data": 1})
    pull(consumer_api, "orders", consumer="c1")
    response = consumer_api.post("/api/v1/pull", {
        "topic": "payments", "consumer": "c1", "results": [{"id": entry["id"], "status": "SUCCESS"}]})
    expect_error(response, 403, "forbidden")
    assert Message.objects.get(id=entry["id"]).status == "RUNNING"


def test_a_pull_cannot_ack_messages_outside_its_tokens_scope(shop_admin_api, producer_api, consumer_api, shop):
    produce(producer_api, {"topic": "orders", "data": 1})
    [other] = produce(shop_admin_api, {"topic": "payments", "data": 1})  # its line, not its scope
    [held] = pull(shop_admin_api, "payments", consumer="c1")
    assert held["id"] == other["id"]
    response = consumer_api.post("/api/v1/pull", {
        "topic": "orders", "consumer": "c1", "results": [{"id": other["id"], "status": "SUCCESS"}]})
    expect_error(response, 403, "forbidden")
    assert dict(Message.objects.filter(topic__in=["orders", "payments"]).values_list("topic", "status")) == {
        "orders": "NEW", "payments": "RUNNING"}


def test_it_extends_held_leases_and_answers_stale_for_others(producer_api, consumer_api):
    a, b = (e["id"] for e in produce(producer_api, {"topic": "orders", "data": 1}, {"topic": "orders", "data": 2}))
    pull(consumer_api, "orders", consumer="c1", max_messages=1)
    before = timezone.now()
    response = consumer_api.post("/api/v1/extend", {"consumer": "c1", "ids": [a, b], "seconds": 600})
    assert response.status_code == 200, response.content
    first, second = response.json()["results"]
    assert first["id"] == a and parse_time(first["lease_expires_at"]) >= before + timedelta(seconds=599)
    assert second == {"id": b, "outcome": "stale"}
    assert Message.objects.get(id=a).lease_expires_at >= before + timedelta(seconds=599)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"ids": [1]}, "consumer"),
        ({"consumer": "c"}, "ids"),
        ({"consumer": "c", "ids": []}, "ids"),
        ({"consumer": "c", "ids": [1, "x"]}, "ids[1]"),
        ({"consumer": "c", "ids": [1], "seconds": 0}, "seconds"),
        ({"consumer": "c", "ids": [1], "seconds": 43201}, "seconds"),
    ],
)
def test_it_refuses_a_bad_extend(consumer_api, body, field):
    expect_error(consumer_api.post("/api/v1/extend", body), 400, "invalid_request", field)


def test_it_releases_at_once_without_spending_an_attempt_or_a_retry(producer_api, consumer_api):
    [entry] = produce(producer_api, {"topic": "orders", "data": 1, "retry_count": 2})
    pull(consumer_api, "orders", consumer="c1")
    response = consumer_api.post("/api/v1/release", {"consumer": "c1", "ids": [entry["id"], 424242]})
    assert response.status_code == 200, response.content
    assert response.json()["results"] == [{"id": entry["id"], "outcome": "released"}, {"id": 424242, "outcome": "stale"}]
    row = Message.objects.get(id=entry["id"])
    assert (row.status, row.attempt, row.retry_remaining, row.lease_owner) == ("NEW", 0, 2, None)
    [again] = pull(consumer_api, "orders", consumer="c2")
    assert again["id"] == entry["id"] and again["attempt"] == 1 and again["retry_remaining"] == 2


@pytest.mark.parametrize(("body", "field"), [({"ids": [1]}, "consumer"), ({"consumer": "c", "ids": "1"}, "ids")])
def test_it_refuses_a_bad_release(consumer_api, body, field):
    expect_error(consumer_api.post("/api/v1/release", body), 400, "invalid_request", field)


def test_it_refuses_release_and_extend_for_a_topic_outside_scope(producer_api, consumer_api, shop):
    from tests.conftest import make_api

    [entry] = produce(producer_api, {"topic": "orders", "data": 1})
    pull(consumer_api, "orders", consumer="c1")
    other = make_api(["consume:payments"], shop)
    for path in ("/api/v1/release", "/api/v1/extend"):
        expect_error(other.post(path, {"consumer": "c1", "ids": [entry["id"]]}), 403, "forbidden")
    assert Message.objects.get(id=entry["id"]).status == "RUNNING"
