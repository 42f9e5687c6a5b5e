"""Transactional (half) messages through the API, and the check-back against a real local
HTTP endpoint (the SDK's WSGI check app)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from messages.models import Message
from messages.transactions.models import Transaction
from messages.transactions.services import transactions_check
from tests.conftest import Api
from tests.support.api import expect_error, produce, pull
from tests.support.checkserver import CheckServer


@pytest.fixture
def checks() -> Iterator[CheckServer]:
    with CheckServer() as server, override_settings(MQ_TRANSACTION_CHECK_HOSTS=[f"127.0.0.1:{server.port}"]):
        yield server


def prepare(api: Api, checks: CheckServer, *items: dict[str, Any], after: int = 30) -> dict[str, Any]:
    response = api.post("/api/v1/messages", {
        "messages": list(items), "transaction": {"check_url": checks.url, "check_after_seconds": after},
    })
    assert response.status_code == 201, response.content
    return response.json()


def test_it_keeps_prepared_messages_from_consumers_until_the_commit(
    producer_api: Api, consumer_api: Api, checks: CheckServer
) -> None:
    answer = prepare(producer_api, checks, {"topic": "orders", "data": 1}, {"topic": "orders", "data": 2})
    assert [m["status"] for m in answer["messages"]] == ["PREPARED", "PREPARED"]
    assert pull(consumer_api, "orders") == []

    response = producer_api.post(f"/api/v1/transactions/{answer['transaction_id']}/commit", {})
    assert response.status_code == 200, response.content
    assert response.json()["state"] == "committed"
    delivered = pull(consumer_api, "orders")
    assert sorted(m["id"] for m in delivered) == sorted(m["id"] for m in answer["messages"])
    # Committing twice is harmless; rolling back a committed transaction is a conflict.
    assert producer_api.post(f"/api/v1/transactions/{answer['transaction_id']}/commit", {}).status_code == 200
    expect_error(producer_api.post(f"/api/v1/transactions/{answer['transaction_id']}/rollback", {}), 409, "conflict")


def test_it_deletes_rolled_back_messages_and_refuses_their_commit(
    producer_api: Api, consumer_api: Api, checks: CheckServer
) -> None:
    answer = prepare(producer_api, checks, {"topic": "orders", "data": 1, "dedup_key": "k1"})
    response = producer_api.post(f"/api/v1/transactions/{answer['transaction_id']}/rollback", {})
    assert response.status_code == 200 and response.json()["state"] == "rolled_back"
    assert not Message.objects.filter(id=answer["messages"][0]["id"]).exists()
    expect_error(producer_api.post(f"/api/v1/transactions/{answer['transaction_id']}/commit", {}), 409, "conflict")
    # The dedup key is free again: the rolled-back message never existed for consumers.
    assert produce(producer_api, {"topic": "orders", "data": 1, "dedup_key": "k1"})[0]["duplicate"] is False


def test_it_answers_404_for_an_unknown_or_foreign_transaction(
    producer_api: Api, outsider_api: Api, checks: CheckServer
) -> None:
    expect_error(producer_api.post("/api/v1/transactions/nope/commit", {}), 404, "not_found")
    answer = prepare(producer_api, checks, {"topic": "orders", "data": 1})
    expect_error(outsider_api.post(f"/api/v1/transactions/{answer['transaction_id']}/commit", {}), 404, "not_found")


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"check_url": "ftp://127.0.0.1/x"}, "transaction.check_url"),
        ({"check_url": "http://10.1.2.3/x"}, "transaction.check_url"),
        ({"check_url": 5}, "transaction.check_url"),
        ({"check_url": "http://127.0.0.1:1/x", "check_after_seconds": 0}, "transaction.check_after_seconds"),
        ({"check_url": "http://127.0.0.1:1/x", "extra": 1}, "transaction.extra"),
    ],
)
def test_it_refuses_a_bad_transaction_and_stores_nothing(
    producer_api: Api, checks: CheckServer, spec: dict[str, Any], field: str
) -> None:
    if "127.0.0.1:1" in str(spec.get("check_url")):
        spec = {**spec, "check_url": checks.url}
    response = producer_api.post("/api/v1/messages", {"messages": [{"topic": "orders", "data": 1}], "transaction": spec})
    expect_error(response, 400, "invalid_request", field)
    assert Message.objects.count() == 0 and Transaction.objects.count() == 0


def test_it_refuses_every_transactional_produce_until_the_operator_lists_check_hosts(producer_api: Api) -> None:
    with override_settings(MQ_TRANSACTION_CHECK_HOSTS=[]):
        response = producer_api.post("/api/v1/messages", {
            "messages": [{"topic": "orders", "data": 1}], "transaction": {"check_url": "http://127.0.0.1:9/x"},
        })
    expect_error(response, 400, "invalid_request", "transaction.check_url")
    assert Message.objects.count() == 0


def test_the_check_back_commits_rolls_back_or_asks_again_as_the_producer_answers(
    producer_api: Api, consumer_api: Api, checks: CheckServer
) -> None:
    txns = [prepare(producer_api, checks, {"topic": "orders", "data": n}, after=1) for n in range(3)]
    committed, rolled_back, unknown = (t["transaction_id"] for t in txns)
    checks.answers.update({committed: "commit", rolled_back: False})  # unknown: no record -> None
    later = timezone.now() + timedelta(seconds=2)

    counts = transactions_check(now=later)

    assert counts == {"checked": 3, "committed": 1, "rolled_back": 1, "unknown": 1}
    assert sorted(checks.asked) == sorted([committed, rolled_back, unknown])
    assert [m["id"] for m in pull(consumer_api, "orders")] == [txns[0]["messages"][0]["id"]]
    states = dict(Transaction.objects.values_list("id", "state"))
    assert states == {committed: "committed", rolled_back: "rolled_back", unknown: "open"}
    pending = Transaction.objects.get(id=unknown)
    assert pending.attempts == 1 and pending.next_check_at > later
    # Not asked again before its next check is due.
    assert transactions_check(now=later)["checked"] == 0


def test_the_check_back_records_an_unreachable_endpoint_and_gives_up_at_last(
    producer_api: Api, checks: CheckServer
) -> None:
    answer = prepare(producer_api, checks, {"topic": "orders", "data": 1}, after=1)
    txn_id = answer["transaction_id"]
    Transaction.objects.filter(id=txn_id).update(check_url=f"http://127.0.0.1:{checks.port}/missing")
    checks.httpd.shutdown()  # nothing answers any more
    checks.httpd.server_close()
    counts = transactions_check(now=timezone.now() + timedelta(seconds=2))
    assert counts["unknown"] == 1
    assert "check-back failed" in Transaction.objects.get(id=txn_id).last_error

    with override_settings(MQ_TRANSACTION_GIVE_UP_SECONDS=60):
        counts = transactions_check(now=timezone.now() + timedelta(seconds=61))
    txn = Transaction.objects.get(id=txn_id)
    assert counts["rolled_back"] == 1 and txn.state == "rolled_back"
    assert txn.log[-1]["event"] == "rolled_back" and "gave up" in txn.log[-1]["log"]
    assert not Message.objects.filter(id=answer["messages"][0]["id"]).exists()


def test_a_retried_prepare_takes_over_the_messages_of_the_one_whose_answer_was_lost(
    producer_api: Api, consumer_api: Api, checks: CheckServer
) -> None:
    item = {"topic": "orders", "data": 1, "dedup_key": "sdk-1"}
    lost = prepare(producer_api, checks, item)
    retried = prepare(producer_api, checks, item)
    assert retried["messages"][0] == {**lost["messages"][0], "duplicate": True}
    assert retried["messages"][0]["status"] == "PREPARED"
    assert Transaction.objects.get(id=lost["transaction_id"]).state == "rolled_back"

    assert producer_api.post(f"/api/v1/transactions/{retried['transaction_id']}/commit", {}).status_code == 200
    assert [m["id"] for m in pull(consumer_api, "orders")] == [lost["messages"][0]["id"]]


def test_a_prepared_message_cancelled_stays_cancelled_when_its_transaction_commits(
    producer_api: Api, shop_admin_api: Api, consumer_api: Api, checks: CheckServer
) -> None:
    answer = prepare(producer_api, checks, {"topic": "orders", "data": 1}, {"topic": "orders", "data": 2})
    cancelled, kept = (m["id"] for m in answer["messages"])
    assert shop_admin_api.post(f"/api/v1/messages/{cancelled}/cancel", {}).json()["status"] == "CANCELLED"
    assert producer_api.post(f"/api/v1/transactions/{answer['transaction_id']}/commit", {}).status_code == 200
    assert [m["id"] for m in pull(consumer_api, "orders")] == [kept]
    assert Message.objects.get(id=cancelled).status == "CANCELLED"
