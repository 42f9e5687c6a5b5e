"""The hand-off (messages/delivery/handoff.py): a message produced while a pull of its group
waits in this process is stored leased to that pull and answered without a claim; every
case a claim must decide keeps the claim. Through the broker's whole ASGI application."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from messages.delivery.answers import pull_answer
from messages.models import Message, Status
from mqcenter.longpoll import parked_pulls
from tests.conftest import Api, make_api
from topics.models import Biz

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("through_asgi")]


def waiting(api: Api, body: dict[str, Any]) -> Callable[[], Any]:
    """Start a pull in a thread once `parked_pulls()` allows telling it apart; answers a
    function that joins it and returns its response."""
    before = parked_pulls()
    answer: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: answer.setdefault("r", api.post("/api/v1/pull", body)))
    thread.start()
    deadline = time.monotonic() + 10
    while parked_pulls() <= before:
        assert time.monotonic() < deadline, "the pull never started waiting"
        time.sleep(0.005)

    def join() -> Any:
        thread.join(timeout=30)
        return answer["r"]

    return join


def produce(api: Api, *items: dict[str, Any]) -> list[dict[str, Any]]:
    response = api.post("/api/v1/messages", {"messages": list(items)})
    assert response.status_code == 201, response.content
    return response.json()["messages"]


@pytest.fixture
def shop_apis(shop: Biz) -> tuple[Api, Api]:
    return make_api(["produce:*"], shop), make_api(["consume:*"], shop)


def test_a_message_produced_while_a_pull_waits_is_stored_leased_to_it(shop_apis: tuple[Api, Api]) -> None:
    producer, consumer = shop_apis
    produce(producer, {"topic": "h", "data": 0})
    consumer.post("/api/v1/pull", {"topic": "h", "consumer": "c"})  # the group exists, its backlog is empty
    pull = waiting(consumer, {"topic": "h", "consumer": "c", "wait_seconds": 20})

    [stored] = produce(producer, {"topic": "h", "data": {"n": 1}, "key": "k", "tag": "t", "headers": {"a": "b"}})
    answer = pull()

    assert stored["status"] == Status.NEW  # as the produce gave it
    [delivered] = answer.json()["messages"]
    assert delivered["id"] == stored["id"] and delivered["data"] == {"n": 1} and delivered["attempt"] == 1
    row = Message.objects.get(id=stored["id"])
    # Rendered from the produce's own row, byte for byte what a claim of the stored row answers.
    assert answer.content == pull_answer([row])
    assert (row.status, row.lease_owner, row.attempt) == (Status.RUNNING, "c", 1)
    # Stored leased in the produce's own statement: a claim after it would pull later.
    assert row.pulled_at == row.add_time
    assert row.lease_expires_at == row.add_time + timedelta(
        seconds=row.timeout_seconds + settings.MQ_LEASE_GRACE_SECONDS)
    assert [(e["event"], e["actor"]) for e in trace(stored["id"])][-1] == ("pulled", "c")

    acked = consumer.post("/api/v1/ack", {"consumer": "c", "results": [{"id": stored["id"], "status": "SUCCESS"}]})
    assert acked.json()["results"] == [{"id": stored["id"], "outcome": "success"}]
    assert Message.objects.get(id=stored["id"]).status == Status.SUCCESS


def trace(message_id: int) -> list[dict[str, Any]]:
    response = make_api(["admin"], Biz.objects.get(name="shop")).get(f"/api/v1/messages/{message_id}")
    assert response.status_code == 200, response.content
    return response.json()["trace"]


def test_a_pull_gets_no_more_than_it_asked_and_the_rest_wait_as_new(shop_apis: tuple[Api, Api]) -> None:
    producer, consumer = shop_apis
    consumer.post("/api/v1/pull", {"topic": "h3", "consumer": "c"})
    pull = waiting(consumer, {"topic": "h3", "consumer": "c", "wait_seconds": 20, "max_messages": 3})

    stored = produce(producer, *({"topic": "h3", "data": n} for n in range(5)))
    answer = pull()

    assert [m["data"] for m in answer.json()["messages"]] == [0, 1, 2]
    statuses = dict(Message.objects.filter(topic="h3").values_list("id", "status"))
    assert [statuses[m["id"]] for m in stored] == [Status.RUNNING] * 3 + [Status.NEW] * 2


def test_a_pull_is_handed_what_a_claim_would_take_first(shop_apis: tuple[Api, Api]) -> None:
    producer, consumer = shop_apis
    consumer.post("/api/v1/pull", {"topic": "hp", "consumer": "c"})
    pull = waiting(consumer, {"topic": "hp", "consumer": "c", "wait_seconds": 20})

    produce(producer, {"topic": "hp", "data": "low", "priority": 0}, {"topic": "hp", "data": "high", "priority": 9})

    assert [m["data"] for m in pull().json()["messages"]] == ["high"]


@pytest.mark.parametrize("case", ["serial group", "delayed message"])
def test_what_a_claim_must_decide_is_claimed(shop_apis: tuple[Api, Api], case: str) -> None:
    producer, consumer = shop_apis
    if case == "serial group":
        created = make_api(["admin"], Biz.objects.get(name="shop")).post("/api/v1/topics", {"topic": "hc", "groups": [{"group": "default", "mode": "serial"}]})
        assert created.status_code == 201, created.content
    item: dict[str, Any] = {"topic": "hc", "data": 1, **({"delay_seconds": 0.3} if case == "delayed message" else {})}
    consumer.post("/api/v1/pull", {"topic": "hc", "consumer": "c"})
    pull = waiting(consumer, {"topic": "hc", "consumer": "c", "wait_seconds": 20})

    [stored] = produce(producer, item)
    answer = pull()

    assert [m["id"] for m in answer.json()["messages"]] == [stored["id"]]
    row = Message.objects.get(id=stored["id"])
    assert row.status == Status.RUNNING and row.pulled_at > row.add_time  # claimed after the produce


def test_another_business_lines_pull_is_never_handed_a_message(shop_apis: tuple[Api, Api], other_biz: Biz) -> None:
    producer, _ = shop_apis
    produce(producer, {"topic": "hb", "data": 0})
    outsider = make_api(["consume:*"], other_biz)
    # Its topic of that name is shop's: the outsider's pull finds nothing and waits.
    pull = waiting(outsider, {"topic": "hb", "consumer": "spy", "wait_seconds": 2})

    [stored] = produce(producer, {"topic": "hb", "data": 1})

    # A hand-off is stored before the produce answers: nothing was handed.
    assert Message.objects.get(id=stored["id"]).status == Status.NEW
    assert pull().json() == {"messages": []}


def test_a_produce_that_stores_nothing_gives_the_pull_back(shop_apis: tuple[Api, Api]) -> None:
    """The repeat of a dedup key is inserted first without a look-up (produce.py), fails on
    the unique index after the offer was taken, and is answered as the duplicate: the pull
    must be declined, wait on, and take the next message."""
    producer, consumer = shop_apis
    [first] = produce(producer, {"topic": "hd", "data": 0, "dedup_key": "k"})
    consumer.post("/api/v1/pull", {"topic": "hd", "consumer": "c"})
    pull = waiting(consumer, {"topic": "hd", "consumer": "c", "wait_seconds": 20})

    [again] = produce(producer, {"topic": "hd", "data": 0, "dedup_key": "k"})
    assert again["id"] == first["id"] and again["duplicate"] is True
    [next_one] = produce(producer, {"topic": "hd", "data": 1})

    assert [m["id"] for m in pull().json()["messages"]] == [next_one["id"]]


def test_a_pull_tired_of_waiting_for_its_produce_claims_and_the_rows_go_back(shop_apis: tuple[Api, Api]) -> None:
    """A produce whose INSERT waits on a lock after it took the pull: the pull gives up past
    its wait (plus HANDOFF_GRACE) and answers; the row, committed later, is put back NEW."""
    if connection.vendor != "mysql":
        pytest.skip("holds a unique key with a second MariaDB session")
    import MySQLdb

    producer, consumer = shop_apis
    produce(producer, {"topic": "ht", "data": 0})
    consumer.post("/api/v1/pull", {"topic": "ht", "consumer": "c"})
    other = MySQLdb.connect(host=connection.settings_dict["HOST"] or "127.0.0.1", user=connection.settings_dict["USER"],
                            port=int(connection.settings_dict["PORT"] or 3306), db=connection.settings_dict["NAME"])
    try:
        cursor = other.cursor()
        cursor.execute("START TRANSACTION")
        cursor.execute(  # the same dedup key, not committed: the produce's INSERT waits on it
            "INSERT INTO mq_message (topic, group_name, data, headers, status, effect_time, retry_remaining, attempt,"
            " timeout_seconds, dedup_key, last_log, add_time, update_time, producer)"
            " VALUES ('ht', 'default', '1', '{}', 'NEW', UTC_TIMESTAMP(6), 0, 0, 60, 'k', '', UTC_TIMESTAMP(6),"
            " UTC_TIMESTAMP(6), 'other')")
        pull = waiting(consumer, {"topic": "ht", "consumer": "c", "wait_seconds": 0.3})
        stored: dict[str, Any] = {}
        producing = threading.Thread(target=lambda: stored.update(produce(producer, {
            "topic": "ht", "group": "default", "data": 1, "dedup_key": "k"})[0]))
        producing.start()
        answer = pull()  # past its wait and the grace, while the INSERT still waits
        cursor.execute("ROLLBACK")
    finally:
        other.close()
    producing.join(timeout=30)

    assert answer.status_code == 200 and answer.json()["messages"] == []
    row = Message.objects.get(id=stored["id"])
    assert (row.status, row.attempt, row.lease_owner, row.pulled_at) == (Status.NEW, 0, None, None)
    taken = consumer.post("/api/v1/pull", {"topic": "ht", "consumer": "c"}).json()["messages"]
    assert [m["id"] for m in taken] == [stored["id"]]
