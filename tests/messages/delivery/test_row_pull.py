"""A claim's "pulled" event lives in the message row (`pulled_at`, by its lease owner, in its
attempt), not in a trace row; a later claim or a release writes it out first, so the trace
still shows every pull, at its own time, in order."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from messages.delivery import sql
from messages.delivery.acks import AckResult, messages_ack, messages_release
from messages.delivery.claims import messages_claim
from messages.delivery.produce import ProduceItem, messages_produce
from messages.models import Message, MessageTrace, Status
from messages.selectors import message_trace
from tests.messages.delivery.test_concurrency import BROKER

pytestmark = pytest.mark.django_db(transaction=True)


def produce_one(topic: str, **fields: object) -> int:
    [result] = messages_produce(principal=BROKER, items=[ProduceItem(topic=topic, data="{}", **fields)])  # type: ignore[arg-type]
    return result.id


def claim(topic: str, consumer: str) -> Message:
    [message], _ = messages_claim(principal=BROKER, topic=topic, group="default", consumer=consumer, max_messages=1)
    return message


def stored(message_id: int) -> list[tuple[str, str, int]]:
    return list(MessageTrace.objects.filter(message_id=message_id).order_by("id")
                .values_list("event", "actor", "attempt"))


def shown(message_id: int) -> list[tuple[str, str, int]]:
    return [(e.event, e.actor, e.attempt) for e in message_trace(Message.objects.get(id=message_id))]


def test_a_claim_keeps_its_pull_in_the_message_row() -> None:
    message_id = produce_one("rowpull")

    claimed = claim("rowpull", "c1")

    row = Message.objects.get(id=message_id)
    assert (row.status, row.lease_owner, row.attempt) == (Status.RUNNING, "c1", 1)
    assert row.pulled_at == claimed.pulled_at == row.update_time
    assert stored(message_id) == []
    assert shown(message_id) == [("produced", "test", 0), ("pulled", "c1", 1)]
    # (rank/total: c1 is not registered here; tests/messages/test_admin_api.py has a ranked pull)
    pulled = message_trace(row)[1]
    assert (pulled.at, pulled.rank, pulled.total) == (row.pulled_at, row.pulled_rank, row.pulled_total)
    assert pulled.status_after == Status.RUNNING and pulled.id is None


def test_the_next_claim_writes_the_earlier_pull_out_at_its_own_time() -> None:
    message_id = produce_one("rowpull", retry_count=1)
    first_pull = claim("rowpull", "c1").pulled_at
    assert messages_ack(principal=BROKER, consumer="c1", results=[AckResult(id=message_id, status="FAIL")]) == [
        {"id": message_id, "outcome": "retry_scheduled", "effect_time": Message.objects.get(id=message_id).effect_time}]
    Message.objects.filter(id=message_id).update(effect_time=timezone.now())  # the retry is due

    second = claim("rowpull", "c2")
    messages_ack(principal=BROKER, consumer="c2", results=[AckResult(id=message_id, status="SUCCESS")])

    assert second.attempt == 2 and second.pulled_at > first_pull
    assert stored(message_id) == [("nacked", "c1", 1), ("retry_scheduled", "c1", 1), ("pulled", "c1", 1),
                                  ("acked", "c2", 2)]
    assert MessageTrace.objects.get(message_id=message_id, event="pulled").at == first_pull
    # Shown by time: the written-out pull before the nack that followed it.
    assert shown(message_id) == [
        ("produced", "test", 0), ("pulled", "c1", 1), ("nacked", "c1", 1), ("retry_scheduled", "c1", 1),
        ("pulled", "c2", 2), ("acked", "c2", 2),
    ]


def test_a_release_writes_the_pull_out_and_clears_the_row() -> None:
    message_id = produce_one("rowpull")
    claim("rowpull", "c1")

    assert messages_release(principal=BROKER, consumer="c1", ids=[message_id]) == [
        {"id": message_id, "outcome": "released"}]
    row = Message.objects.get(id=message_id)
    assert (row.status, row.attempt, row.lease_owner, row.pulled_at, row.pulled_rank) == (Status.NEW, 0, None, None, None)
    assert stored(message_id) == [("pulled", "c1", 1), ("released", "c1", 0)]

    claim("rowpull", "c2")  # the row held no pull: nothing more is written out
    assert stored(message_id) == [("pulled", "c1", 1), ("released", "c1", 0)]
    assert shown(message_id) == [("produced", "test", 0), ("pulled", "c1", 1), ("released", "c1", 0),
                                 ("pulled", "c2", 1)]


def test_one_lease_statement_leases_to_its_owner_and_skips_rows_taken_meanwhile() -> None:
    ids = [produce_one("rowpull") for _ in range(3)]
    Message.objects.filter(id=ids[2]).update(status="RUNNING", lease_owner="other")
    now = timezone.now()

    changed = sql.lease(ids, "a", (1, 3), now + timedelta(seconds=60), now)

    assert changed == 2
    assert set(Message.objects.filter(id__in=ids).values_list("id", "lease_owner", "pulled_rank", "pulled_total",
                                                               "pulled_at", "attempt")) == {
        (ids[0], "a", 1, 3, now, 1), (ids[1], "a", 1, 3, now, 1), (ids[2], "other", None, None, None, 0)}
