"""Acks carried by a pull: applied in its claim's transaction, a clean batch in one guarded
UPDATE, the rest (stolen rows, failures, repeats, other groups) row by row.

Real transactions (not the test's wrapping one): the commits counted are MariaDB's own.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from messages.delivery.lifecycle import leases_recover
from messages.models import Message, MessageTrace
from messages.selectors import message_trace
from tests.support.api import produce, pull
from topics.cache import topic_cache
from topics.models import Topic

pytestmark = pytest.mark.django_db(transaction=True)


def session(*names: str) -> dict[str, int]:
    """MariaDB's counters of this test's connection (the in-process client shares it)."""
    with connection.cursor() as cursor:
        marks = ",".join(["%s"] * len(names))
        cursor.execute(f"SHOW SESSION STATUS WHERE Variable_name IN ({marks})", names)
        return {name: int(value) for name, value in cursor.fetchall()}


def pull_carrying(api, results, *, consumer="c1", topic="orders", group="default", max_messages=10):
    response = api.post("/api/v1/pull", {"topic": topic, "group": group, "consumer": consumer,
                                         "max_messages": max_messages, "results": results})
    assert response.status_code == 200, response.content
    return response.json()


def success(*ids):
    return [{"id": i, "status": "SUCCESS"} for i in ids]


def test_a_clean_batch_ack_and_the_next_claim_commit_once(producer_api, consumer_api):
    ids = [e["id"] for e in produce(producer_api, *({"topic": "orders", "data": i} for i in range(6)))]
    held = [m["id"] for m in pull(consumer_api, "orders", consumer="c1", max_messages=3)]
    counters = ("Com_commit", "Com_update", "Com_insert", "Com_insert_select")
    before = session(*counters)
    answer = pull_carrying(consumer_api, success(*held))
    after = session(*counters)
    assert [m["id"] for m in answer["messages"]] == ids[3:]
    assert answer["results"] == [{"id": i, "outcome": "success"} for i in held]
    # one transaction: the acks' UPDATE, the claim's lease UPDATE; a first delivery's
    # success writes no trace row (its row holds it)
    assert after["Com_commit"] - before["Com_commit"] == 1
    assert after["Com_update"] - before["Com_update"] == 2
    assert after["Com_insert"] - before["Com_insert"] == 0
    assert after["Com_insert_select"] - before["Com_insert_select"] == 0
    rows = {m.id: m for m in Message.objects.filter(id__in=ids)}
    assert {rows[i].status for i in held} == {"SUCCESS"} and {rows[i].status for i in ids[3:]} == {"RUNNING"}
    assert all(rows[i].lease_expires_at is None for i in held)
    assert not MessageTrace.objects.filter(message_id__in=held).exists()
    for i in held:  # the trace shows the ack from the row, as the ack would have written it
        acked = [e for e in message_trace(rows[i]) if e.event == "acked"]
        assert [(e.actor, e.attempt, e.status_after, e.log, e.rank, e.total, e.at) for e in acked] == [
            ("c1", 1, "SUCCESS", "", None, None, rows[held[0]].update_time)]


def test_a_clean_batch_ack_of_a_later_attempt_writes_its_trace_rows(producer_api, consumer_api):
    ids = [e["id"] for e in produce(producer_api, *({"topic": "orders", "data": i, "retry_count": 3}
                                                    for i in range(3)))]
    assert [m["id"] for m in pull(consumer_api, "orders", consumer="c1", max_messages=3)] == ids
    Message.objects.filter(id=ids[1]).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert leases_recover() == 1
    Message.objects.filter(id=ids[1]).update(effect_time=timezone.now())
    assert [m["id"] for m in pull(consumer_api, "orders", consumer="c1", max_messages=1)] == [ids[1]]
    counters = ("Com_update", "Com_insert_select")
    before = session(*counters)
    answer = pull_carrying(consumer_api, success(*ids))
    after = session(*counters)
    assert answer["results"] == [{"id": i, "outcome": "success"} for i in ids]
    # first deliveries, then the later attempt and its "acked" row copied from it
    assert after["Com_update"] - before["Com_update"] == 2
    assert after["Com_insert_select"] - before["Com_insert_select"] == 1
    assert list(MessageTrace.objects.filter(message_id__in=ids, event="acked")
                .values_list("message_id", "actor", "attempt", "log")) == [(ids[1], "c1", 2, "")]
    rows = {m.id: m for m in Message.objects.filter(id__in=ids)}
    assert [[(e.actor, e.attempt) for e in message_trace(rows[i]) if e.event == "acked"] for i in ids] == [
        [("c1", 1)], [("c1", 2)], [("c1", 1)]]


def test_a_batch_with_a_row_taken_away_falls_back_row_by_row(producer_api, consumer_api):
    ids = [e["id"] for e in produce(producer_api, *({"topic": "orders", "data": i, "retry_count": 3}
                                                    for i in range(3)))]
    assert [m["id"] for m in pull(consumer_api, "orders", consumer="c1", max_messages=3)] == ids
    # the middle one's lease expires, the broker takes it back and c2 holds it now
    Message.objects.filter(id=ids[1]).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert leases_recover() == 1
    Message.objects.filter(id=ids[1]).update(effect_time=timezone.now())  # its retry is due
    assert [m["id"] for m in pull(consumer_api, "orders", consumer="c2")] == [ids[1]]
    answer = pull_carrying(consumer_api, success(*ids))
    assert answer["messages"] == []
    assert answer["results"] == [{"id": ids[0], "outcome": "success"}, {"id": ids[1], "outcome": "stale"},
                                 {"id": ids[2], "outcome": "success"}]
    rows = {m.id: m for m in Message.objects.filter(id__in=ids)}
    assert [(rows[i].status, rows[i].lease_owner) for i in ids] == [
        ("SUCCESS", "c1"), ("RUNNING", "c2"), ("SUCCESS", "c1")]
    events = sorted((i, e.event) for i in ids for e in message_trace(rows[i])
                    if e.actor == "c1" and e.event in ("acked", "stale_ack"))
    assert events == [(ids[0], "acked"), (ids[1], "stale_ack"), (ids[2], "acked")]
    assert not MessageTrace.objects.filter(message_id__in=ids, event="acked").exists()  # held by the rows
    # c2 still acks its own delivery
    assert pull_carrying(consumer_api, success(ids[1]), consumer="c2")["results"] == [
        {"id": ids[1], "outcome": "success"}]
    assert Message.objects.get(id=ids[1]).status == "SUCCESS"


def test_a_mixed_batch_answers_each_result_in_order(producer_api, consumer_api):
    ids = [e["id"] for e in produce(producer_api, *({"topic": "orders", "data": i, "retry_count": 0}
                                                    for i in range(4)))]
    pull(consumer_api, "orders", consumer="c1", max_messages=1)
    assert pull_carrying(consumer_api, success(ids[0]), max_messages=3)["results"] == [
        {"id": ids[0], "outcome": "success"}]
    results = [{"id": ids[1], "status": "FAIL", "log": "boom"}, {"id": ids[0], "status": "SUCCESS"},
               {"id": ids[2], "status": "SUCCESS", "log": "done"}, {"id": ids[3], "status": "SUCCESS"},
               {"id": 10**12, "status": "SUCCESS"}]
    answer = pull_carrying(consumer_api, results)
    assert [(r["id"], r["outcome"]) for r in answer["results"]] == [
        (ids[1], "failed"), (ids[0], "success"), (ids[2], "success"), (ids[3], "success"), (10**12, "stale")]
    rows = {m.id: m for m in Message.objects.filter(id__in=ids)}
    assert [rows[i].status for i in ids] == ["SUCCESS", "FAIL", "SUCCESS", "SUCCESS"]
    assert rows[ids[2]].last_log == "done" and rows[ids[1]].last_log == "boom"
    assert [e.event for e in message_trace(rows[ids[0]])].count("acked") == 1  # the repeat adds none
    assert not MessageTrace.objects.filter(message_id=ids[0]).exists()
    # a success with a log writes its ack (and the pull before it) as trace rows, not on the row
    assert rows[ids[2]].pulled_at is None
    assert list(MessageTrace.objects.filter(message_id=ids[2]).order_by("id").values_list("event", "actor", "log")) == [
        ("pulled", "c1", ""), ("acked", "c1", "done")]
    assert [e.event for e in message_trace(rows[ids[2]])] == ["produced", "pulled", "acked"]


def test_acks_of_another_group_ride_on_a_pull(producer_api, consumer_api):
    produce(producer_api, {"topic": "orders", "data": 0})  # the topic, with its default group
    pull(consumer_api, "orders", group="default", consumer="c0")
    assert pull(consumer_api, "orders", group="audit") == []  # subscribed: the next produce gives it a copy
    produce(producer_api, {"topic": "orders", "data": 1})
    [audit] = pull(consumer_api, "orders", group="audit", consumer="c1")
    answer = pull_carrying(consumer_api, success(audit["id"]), group="default")
    assert answer["results"] == [{"id": audit["id"], "outcome": "success"}]
    [copy] = answer["messages"]
    assert copy["group"] == "default" and copy["id"] != audit["id"]
    assert Message.objects.get(id=audit["id"]).status == "SUCCESS"


def test_a_paused_topic_still_takes_the_acks_a_pull_carries(admin_api, producer_api, consumer_api):
    [entry] = produce(producer_api, {"topic": "orders", "data": 1})
    pull(consumer_api, "orders", consumer="c1")
    Topic.objects.filter(name="orders").update(paused=True)
    topic_cache.forget("orders")
    answer = pull_carrying(consumer_api, success(entry["id"]))
    assert answer == {"messages": [], "results": [{"id": entry["id"], "outcome": "success"}]}
    assert Message.objects.get(id=entry["id"]).status == "SUCCESS"
