"""The heap report for a window that ended in the past, over traffic made through the broker's
API (this process's URL configuration, the real services and MariaDB) that went on after the
window: every figure is the state as of `until`, recomputed here from what the traffic did.

One group per shape of traffic the as-of rebuild must read right:
- pay/settle: messages snoozed by their consumer across `until` (delayed, not waiting), beside
  failures retried across it and messages waiting; all of them change after `until`.
- shop/tx: transactions: one committed in the window, one cancelled before its commit in the
  window, one cancelled before its commit after `until`, one left open: only the committed
  message was ever produced; shop/gone: a group deleted while its message was PREPARED.
- hist/etl and hist/replay: copies of archived history (an archive redrive, a group replayed
  from the earliest message) keep the original add time of long ago, and enter the heap when
  they are made: two redriven and five replayed in the window, three redriven after it.
- notify/sms (the trace report): of five messages, three succeed, one expires undelivered,
  one is cancelled.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from messages.archive.models import MessageArchive
from messages.models import Message, MessageTrace
from messages.transactions.models import Transaction
from tests.conftest import Api, make_api
from tests.support.api import ack, produce, pull
from tests.support.archive import archive_messages
from tests.support.waiting import wait_until
from topics.models import ApiToken, Topic

pytestmark = [pytest.mark.spark, pytest.mark.django_db, pytest.mark.timeout(300)]

HOUR = 3600


def now() -> datetime:
    return timezone.now().astimezone(UTC).replace(tzinfo=None)


def _clean() -> None:
    for model in (Message, MessageArchive, MessageTrace, Transaction, Topic, ApiToken):
        model.objects.all().delete()


def _topic(api: Api, name: str, group: str, **settings: Any) -> None:
    response = api.post("/api/v1/topics", {"topic": name, "groups": [{"group": group}], **settings})
    assert response.status_code == 201, response.content


def _ids(api: Api, topic: str, group: str, count: int, **item: Any) -> list[int]:
    return [m["id"] for m in produce(api, *({"topic": topic, "group": group, "data": n, **item}
                                          for n in range(count)))]


def _cancel(api: Api, ids: list[int]) -> None:
    for message_id in ids:
        response = api.post(f"/api/v1/messages/{message_id}/cancel", {})
        assert response.status_code == 200, response.content


def _prepare(api: Api, topic: str, group: str, count: int) -> tuple[str, list[int]]:
    body = {"messages": [{"topic": topic, "group": group, "data": n} for n in range(count)],
            "transaction": {"check_url": "http://127.0.0.1:9/check", "check_after_seconds": HOUR}}
    with override_settings(MQ_TRANSACTION_CHECK_HOSTS=["127.0.0.1:9"]):
        response = api.post("/api/v1/messages", body)
    assert response.status_code == 201, response.content
    answer = response.json()
    return answer["transaction_id"], [m["id"] for m in answer["messages"]]


def _redrive(api: Api, ids: list[int]) -> list[int]:
    response = api.post("/api/v1/archive/messages/redrive", {"ids": ids})
    assert response.status_code == 200, response.content
    assert response.json()["count"] == len(ids), response.content
    return [c["id"] for c in response.json()["copies"]]


def _make(api: Api) -> dict[str, Any]:
    since = now()
    _topic(api, "pay", "settle", retry_count=3, retry_strategy="fixed", retry_interval_seconds=HOUR)
    snoozed = _ids(api, "pay", "settle", 3)
    assert sorted(m["id"] for m in pull(api, "pay", group="settle", max_messages=3)) == snoozed
    outcomes = ack(api, "c1", *({"id": i, "status": "RETRY", "delay_seconds": HOUR, "log": "later"}
                                for i in snoozed))
    assert [o["outcome"] for o in outcomes] == ["retry_scheduled"] * 3
    failed = _ids(api, "pay", "settle", 2)
    assert sorted(m["id"] for m in pull(api, "pay", group="settle", max_messages=2)) == failed
    outcomes = ack(api, "c1", *({"id": i, "status": "FAIL", "log": "declined"} for i in failed))
    assert [o["outcome"] for o in outcomes] == ["retry_scheduled"] * 2
    waiting = _ids(api, "pay", "settle", 2)

    _topic(api, "shop", "tx")
    committed, _ = _prepare(api, "shop", "tx", 1)
    assert api.post(f"/api/v1/transactions/{committed}/commit", {}).status_code == 200
    _, withdrawn = _prepare(api, "shop", "tx", 2)
    _cancel(api, withdrawn)
    _, withdrawn_later = _prepare(api, "shop", "tx", 1)
    _prepare(api, "shop", "tx", 1)  # left open
    # A group deleted with a transaction's message still PREPARED: cancelled, never produced.
    assert api.post("/api/v1/topics/shop/groups", {"group": "gone"}).status_code == 201
    _prepare(api, "shop", "gone", 1)
    assert api.delete("/api/v1/topics/shop/groups/gone").status_code == 204

    _topic(api, "hist", "etl")
    history = [m["id"] for m in produce(api, *({"topic": "hist", "data": n} for n in range(5)))]
    assert sorted(m["id"] for m in pull(api, "hist", group="etl", max_messages=5)) == history
    assert [o["outcome"] for o in ack(api, "c1", *({"id": i, "status": "SUCCESS"} for i in history))] == [
        "success"] * 5
    archive_messages(history)  # aged 400 days, then archived
    redriven = _redrive(api, history[:2])
    response = api.post("/api/v1/topics/hist/groups", {"group": "replay", "mode": "queue", "start": "earliest"})
    assert response.status_code == 201, response.content
    replayed = list(Message.objects.filter(topic="hist", group_name="replay").values_list("id", flat=True))
    assert len(replayed) == 5

    _topic(api, "notify", "sms")
    expires = timezone.now() + timedelta(seconds=1)
    [expiring] = _ids(api, "notify", "sms", 1, expires_at=expires.isoformat())
    delivered = _ids(api, "notify", "sms", 3)
    _cancel(api, _ids(api, "notify", "sms", 1))
    wait_until(lambda: timezone.now() > expires, timeout=5, what="the message's expiry")
    assert sorted(m["id"] for m in pull(api, "notify", group="sms", max_messages=10)) == delivered
    assert [o["outcome"] for o in ack(api, "c1", *({"id": i, "status": "SUCCESS"} for i in delivered))] == [
        "success"] * 3
    assert Message.objects.get(id=expiring).status == "EXPIRED"
    until = now()

    # After the window: the delayed messages are withdrawn, more is produced.
    _cancel(api, snoozed + failed + withdrawn_later)
    _ids(api, "pay", "settle", 2)
    _redrive(api, history[2:])
    added = dict(Message.objects.filter(id__in=waiting).values_list("id", "add_time"))
    copied = {
        name: [m.replace(tzinfo=None) for m in Message.objects.filter(id__in=ids).values_list("copied_at", flat=True)]
        for name, ids in (("etl", redriven), ("replay", replayed))
    }
    return {"since": since, "until": until, "oldest_waiting": min(added.values()).replace(tzinfo=None),
            "copied": copied}


# This module empties the tables before and after its traffic, so it runs before the package's
# stored world (`stored`, first used by the modules named after it) is written.
@pytest.fixture(scope="module")
def traffic(django_db_setup: Any, django_db_blocker: Any) -> Iterator[dict[str, Any]]:
    with django_db_blocker.unblock():
        _clean()
        made = _make(make_api(["admin"]))
    try:
        yield made
    finally:
        with django_db_blocker.unblock():
            _clean()


@pytest.fixture(scope="module")
def heap(traffic: dict[str, Any], django_db_blocker: Any, spark_local: Any) -> dict[str, Any]:
    from reports.services import report_config
    from spark.jobs import run_heap_report

    with django_db_blocker.unblock():
        config = report_config(since=traffic["since"], until=traffic["until"])
    return run_heap_report(config)


@pytest.fixture(scope="module")
def trace(traffic: dict[str, Any], django_db_blocker: Any, spark_local: Any) -> dict[str, Any]:
    from reports.services import report_config
    from spark.jobs import run_trace_report

    with django_db_blocker.unblock():
        config = report_config(since=traffic["since"], until=traffic["until"], topics=("notify",))
    return run_trace_report(config)


def group(report: dict[str, Any], topic: str, name: str) -> dict[str, Any]:
    return {(g["topic"], g["group"]): g for g in report["groups"]}[(topic, name)]


def test_a_snooze_spanning_until_is_delayed_not_waiting(heap: dict[str, Any], traffic: dict[str, Any]) -> None:
    row = group(heap, "pay", "settle")
    assert (row["backlog"], row["delayed"], row["running"]) == (2, 5, 0)
    oldest = (traffic["until"] - traffic["oldest_waiting"]).total_seconds()
    assert row["oldest_age_seconds"] == pytest.approx(oldest, abs=2e-3)
    assert (row["inflow"], row["outflow"]) == (7, 0)


def test_a_prepared_message_cancelled_before_its_commit_was_never_produced(heap: dict[str, Any]) -> None:
    row = group(heap, "shop", "tx")
    # Only the committed message: it entered the heap at its commit and waits.
    assert (row["backlog"], row["delayed"], row["running"]) == (1, 0, 0)
    assert (row["inflow"], row["outflow"]) == (1, 0)
    assert [p["inflow"] for s in heap["hourly"] if (s["topic"], s["group"]) == ("shop", "tx")
            for p in s["hours"] if p["inflow"] or p["outflow"]] == [1]
    # The deleted group's message, cancelled while PREPARED, neither flowed in nor out.
    assert ("shop", "gone") not in {(g["topic"], g["group"]) for g in heap["groups"]}


def hourly(report: dict[str, Any], topic: str, name: str) -> dict[str, tuple[int, int]]:
    return {p["hour"]: (p["inflow"], p["outflow"]) for s in report["hourly"] if (s["topic"], s["group"]) == (topic, name)
            for p in s["hours"] if p["inflow"] or p["outflow"]}


def test_copies_of_archived_history_enter_the_heap_when_they_are_made(
    heap: dict[str, Any], traffic: dict[str, Any]
) -> None:
    until = traffic["until"]
    for name, waiting in (("etl", 2), ("replay", 5)):
        copied = traffic["copied"][name]
        assert len(copied) == waiting and all(traffic["since"] <= c < until for c in copied), name
        row = group(heap, "hist", name)
        # The three copies made after `until` were not there yet; the originals, produced in
        # the window and finished, were aged and archived (their history is 400 days old).
        assert (row["backlog"], row["delayed"], row["running"]) == (waiting, 0, 0), name
        assert row["oldest_age_seconds"] == pytest.approx((until - min(copied)).total_seconds(), abs=2e-3), name
        assert (row["inflow"], row["outflow"], row["active_hours"]) == (waiting, 0, len({
            c.replace(minute=0, second=0, microsecond=0) for c in copied})), name
        hours: dict[str, int] = {}
        for c in copied:
            hour = c.replace(minute=0, second=0, microsecond=0).isoformat()
            hours[hour] = hours.get(hour, 0) + 1
        assert hourly(heap, "hist", name) == {h: (n, 0) for h, n in hours.items()}, name


def test_the_trace_verdict_counts_expired_and_cancelled_messages(trace: dict[str, Any]) -> None:
    from reports.formatting import trace_verdicts

    row = group(trace, "notify", "sms")
    assert {k: row[k] for k in ("messages", "success", "expired", "cancelled", "new", "running")} == {
        "messages": 5, "success": 3, "expired": 1, "cancelled": 1, "new": 0, "running": 0}
    [verdict] = trace_verdicts(trace)
    assert verdict["verdict"].startswith(
        "5 messages, 60% of the finished succeeded, 20% expired, 20% cancelled, p99 latency"), verdict
