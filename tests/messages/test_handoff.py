"""Hand-off (messages/services/handoff.py): a produce gives its messages to the pulls idle-
waiting in this process, leased to them and traced PULLED in its own transaction, and every
way that can go wrong leaves each message accounted for.

The pulls are real long-polls through the broker's ASGI application (the fast path), on its
event loop in another thread; the produces run in the test's thread or in threads of their
own, each with its own database connection. A produce is held inside its transaction with a
real table lock on the trace table (its trace INSERT waits), as in test_combined_claims.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from django.db import connection, transaction

from messages.models import Message, MessageTrace, Status, TraceEvent
from messages.services import ProduceItem, messages_produce
from messages.services.handoff import HandOffs, Offer, Reservation, handoffs, reserved_shares
from mqcenter import metrics
from tests.api.helpers import produce
from tests.conftest import Api, make_api
from tests.messages.test_combined_claims import _blocked_on_trace_table, _raw_connection, _wait_for
from tests.messages.test_concurrency import BROKER
from tests.support.asgi import AsgiClient
from topics.cache import topic_cache
from topics.models import DeliveryMode, TopicGroup

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def consumer(shop: Any) -> Api:
    return make_api(["consume:orders*"], shop)


class WaitingPull:
    """A long-poll through the ASGI application, answered on its event loop."""

    def __init__(self, api: Api, topic: str, consumer: str, *, group: str = "default", max_messages: int = 1,
                 wait_seconds: float = 20) -> None:
        loop, client = AsgiClient._start()
        body = {"topic": topic, "group": group, "consumer": consumer, "max_messages": max_messages,
                "wait_seconds": wait_seconds}
        call = client.post("/api/v1/pull", json=body, headers={"authorization": f"Bearer {api.token}"}, timeout=60)
        self.future = asyncio.run_coroutine_threadsafe(call, loop)

    def messages(self) -> list[dict[str, Any]]:
        answer = self.future.result(timeout=30)
        assert answer.status_code == 200, answer.content
        return answer.json()["messages"]


def _waiting(topic: str, count: int, group: str = "default") -> None:
    _wait_for(lambda: handoffs.waiting((topic, group)) == count, f"{count} pulls of {topic} to wait")


def _handed(topic: str, group: str = "default") -> float:
    value = metrics.registry.get_sample_value("mq_messages_handed_off_total", {"topic": topic, "group": group})
    return value or 0.0


def _events(message_id: int) -> list[tuple[str, str, Any]]:
    return list(MessageTrace.objects.filter(message_id=message_id).order_by("id").values_list("event", "actor", "at"))


class HeldProduce:
    """A produce in its own thread, held inside its transaction by a lock on the trace table."""

    def __init__(self, topic: str, count: int = 1) -> None:
        self.lock_conn = _raw_connection()
        self.lock_conn.cursor().execute(f"LOCK TABLES {MessageTrace._meta.db_table} WRITE")
        self.ids: list[int] = []
        self.error: BaseException | None = None

        def run() -> None:
            try:
                items = [ProduceItem(topic=topic, data=f'{{"n":{i}}}') for i in range(count)]
                self.ids = [r.id for r in messages_produce(principal=BROKER, items=items)]
            except BaseException as exc:  # noqa: BLE001 - asserted by the test
                self.error = exc
            finally:
                connection.close()

        self.thread = threading.Thread(target=run)
        self.thread.start()
        _wait_for(lambda: _blocked_on_trace_table(self.lock_conn) is not None, "the produce to wait on the lock")

    def kill(self) -> None:
        self.lock_conn.cursor().execute(f"KILL {int(_blocked_on_trace_table(self.lock_conn))}")

    def release(self) -> None:
        self.lock_conn.cursor().execute("UNLOCK TABLES")
        self.thread.join(timeout=30)
        self.lock_conn.close()
        assert not self.thread.is_alive(), "the produce hung"


def test_an_idle_pull_is_handed_the_message_leased_and_traced_in_the_produce_transaction(producer_api, consumer):
    produce(producer_api, {"topic": "orders", "data": "first"})  # the topic exists, its group is known
    Message.objects.all().delete()
    pull = WaitingPull(consumer, "orders", "c1")
    _waiting("orders", 1)
    before = _handed("orders")

    [entry] = produce(producer_api, {"topic": "orders", "data": {"n": 1}, "key": "k", "headers": {"h": "v"}})

    [got] = pull.messages()
    assert (got["id"], got["data"], got["key"], got["headers"], got["attempt"]) == (entry["id"], {"n": 1}, "k", {"h": "v"}, 1)
    assert entry["status"] == Status.NEW  # the produce answers as stored (API.md)
    stored = Message.objects.get(id=entry["id"])
    assert (stored.status, stored.lease_owner, stored.attempt) == (Status.RUNNING, "c1", 1)
    assert got["lease_expires_at"] == stored.lease_expires_at.isoformat().replace("+00:00", "Z")
    assert got["effect_time"] == stored.effect_time.isoformat().replace("+00:00", "Z")
    # PRODUCED and PULLED in one transaction: one time for both.
    events = _events(entry["id"])
    assert [(e, actor) for e, actor, _ in events] == [(TraceEvent.PRODUCED, events[0][1]), (TraceEvent.PULLED, "c1")]
    assert events[0][2] == events[1][2]
    assert _handed("orders") == before + 1


def test_the_first_produce_to_a_new_topic_hands_off_too(producer_api, consumer):
    pull = WaitingPull(consumer, "orders-new", "c1")
    _waiting("orders-new", 1)
    [entry] = produce(producer_api, {"topic": "orders-new", "data": 1})
    assert [m["id"] for m in pull.messages()] == [entry["id"]]
    assert _handed("orders-new") == 1  # the only test of this topic


def test_a_produce_deals_its_batch_to_the_waiting_pulls_oldest_first_each_up_to_its_limit(producer_api, consumer):
    produce(producer_api, {"topic": "orders", "data": "first"})
    Message.objects.all().delete()
    pulls = []
    for n in range(3):
        pulls.append(WaitingPull(consumer, "orders", f"c{n}", max_messages=2))
        _waiting("orders", n + 1)
    entries = produce(producer_api, *({"topic": "orders", "data": i} for i in range(5)))
    ids = [e["id"] for e in entries]
    assert [[m["id"] for m in p.messages()] for p in pulls] == [ids[0:2], ids[2:4], ids[4:5]]
    owners = dict(Message.objects.filter(id__in=ids).values_list("id", "lease_owner"))
    assert [owners[i] for i in ids] == ["c0", "c0", "c1", "c1", "c2"]


def test_what_the_waiting_pulls_cannot_take_stays_new_for_the_others(producer_api, consumer):
    produce(producer_api, {"topic": "orders", "data": "first"})
    Message.objects.all().delete()
    pull = WaitingPull(consumer, "orders", "c1", max_messages=2)
    _waiting("orders", 1)
    entries = produce(producer_api, *({"topic": "orders", "data": i} for i in range(5)))
    assert len(pull.messages()) == 2
    statuses = dict(Message.objects.filter(id__in=[e["id"] for e in entries]).values_list("id", "status"))
    assert sorted(statuses.values()) == [Status.NEW] * 3 + [Status.RUNNING] * 2


def test_a_delayed_message_is_claimed_when_due_not_handed_off(producer_api, consumer):
    produce(producer_api, {"topic": "orders", "data": "first"})
    Message.objects.all().delete()
    before = _handed("orders")
    pull = WaitingPull(consumer, "orders", "c1", wait_seconds=10)
    _waiting("orders", 1)
    [delayed] = produce(producer_api, {"topic": "orders", "data": 1, "delay_seconds": 0.3})
    assert [m["id"] for m in pull.messages()] == [delayed["id"]]
    produced, pulled = (at for _, _, at in _events(delayed["id"]))
    assert (pulled - produced).total_seconds() >= 0.3
    assert _handed("orders") == before


def test_a_serial_group_keeps_its_claims(producer_api, consumer):
    produce(producer_api, {"topic": "orders", "group": "ordered", "data": "first"})
    Message.objects.all().delete()
    TopicGroup.objects.filter(topic__name="orders", name="ordered").update(mode=DeliveryMode.SERIAL)
    topic_cache.forget()
    before = _handed("orders", "ordered")
    pull = WaitingPull(consumer, "orders", "c1", group="ordered", wait_seconds=10)
    _waiting("orders", 1, "ordered")
    [entry] = produce(producer_api, {"topic": "orders", "group": "ordered", "data": 2})
    assert [m["id"] for m in pull.messages()] == [entry["id"]]
    assert _handed("orders", "ordered") == before


def test_a_produce_inside_a_callers_transaction_hands_nothing_off(producer_api, consumer):
    produce(producer_api, {"topic": "orders", "data": "first"})
    Message.objects.all().delete()
    before = _handed("orders")
    pull = WaitingPull(consumer, "orders", "c1")
    _waiting("orders", 1)
    with transaction.atomic():
        [result] = messages_produce(principal=BROKER, items=[ProduceItem(topic="orders", data="1")])
        assert handoffs.waiting(("orders", "default")) == 1  # still open: nothing promised
    assert [m["id"] for m in pull.messages()] == [result.id]
    assert _handed("orders") == before


def test_a_produce_that_fails_stores_nothing_and_leaves_its_pulls_waiting(producer_api, consumer):
    produce(producer_api, {"topic": "orders", "data": "first"})
    Message.objects.all().delete()
    pull = WaitingPull(consumer, "orders", "c1")
    _waiting("orders", 1)
    held = HeldProduce("orders")
    assert handoffs.waiting(("orders", "default")) == 0  # reserved by the held produce
    held.kill()  # its connection dies inside the transaction
    held.release()
    assert held.error is not None
    assert not Message.objects.filter(topic="orders").exists()
    _waiting("orders", 1)  # back to waiting, open to the next produce
    [entry] = produce(producer_api, {"topic": "orders", "data": 2})
    assert [m["id"] for m in pull.messages()] == [entry["id"]]


def test_a_pull_whose_wait_ends_while_a_produce_holds_it_answers_with_what_was_committed(producer_api, consumer):
    produce(producer_api, {"topic": "orders", "data": "first"})
    Message.objects.all().delete()
    pull = WaitingPull(consumer, "orders", "c1", wait_seconds=0.5)
    _waiting("orders", 1)
    held = HeldProduce("orders")
    time.sleep(1.0)  # the pull's wait is over; it waits for the produce's outcome instead
    assert not pull.future.done()
    held.release()
    assert held.error is None
    assert [m["id"] for m in pull.messages()] == held.ids
    assert Message.objects.get(id=held.ids[0]).lease_owner == "c1"


def test_a_pull_cancelled_while_a_produce_holds_it_gets_its_messages_released(producer_api, consumer):
    produce(producer_api, {"topic": "orders", "data": "first"})
    Message.objects.all().delete()
    pull = WaitingPull(consumer, "orders", "c1")
    _waiting("orders", 1)
    held = HeldProduce("orders", count=2)
    pull.future.cancel()  # the client went away
    _wait_for(lambda: pull.future.done(), "the pull to end")
    held.release()
    assert held.error is None
    # Committed, then handed back at once: NEW, no attempt spent, the RELEASED trace says so.
    rows = Message.objects.filter(id__in=held.ids)
    assert {(m.status, m.attempt, m.lease_owner) for m in rows} == {(Status.NEW, 0, None)}
    assert [e for e, _, _ in _events(held.ids[0])] == [TraceEvent.PRODUCED, TraceEvent.PULLED, TraceEvent.RELEASED]


def test_a_broadcast_hands_each_groups_copy_to_that_groups_pull(producer_api, consumer):
    produce(producer_api, {"topic": "orders", "group": "billing", "data": 0},
            {"topic": "orders", "group": "shipping", "data": 0})
    Message.objects.all().delete()
    billing = WaitingPull(consumer, "orders", "b1", group="billing")
    shipping = WaitingPull(consumer, "orders", "s1", group="shipping")
    _waiting("orders", 1, "billing")
    _waiting("orders", 1, "shipping")
    entries = produce(producer_api, {"topic": "orders", "data": "all", "broadcast": True})
    by_group = {e["group"]: e["id"] for e in entries}
    assert [m["id"] for m in billing.messages()] == [by_group["billing"]]
    assert [m["id"] for m in shipping.messages()] == [by_group["shipping"]]


def test_a_reservation_given_back_puts_the_pull_first_in_line_again() -> None:
    """The registry alone (no produce): what `settle` does with each state."""

    class Wake:
        def __init__(self) -> None:
            self.woken = 0

        def set(self) -> None:
            self.woken += 1

    registry = HandOffs()
    offers = [Offer(("t", "g"), BROKER, f"c{n}", 2, Wake()) for n in range(3)]  # type: ignore[arg-type]
    for offer in offers:
        registry._idle.setdefault(("t", "g"), {})[offer] = None
    reservation = Reservation()
    assert registry.reserve(reservation, ("t", "g"), 3, None) == offers[:2]
    assert [(o.consumer, share) for o, share in reserved_shares(offers[:2], [1, 2, 3])] == [("c0", [1, 2]), ("c1", [3])]
    assert registry.settle(reservation, committed=False) == []
    assert list(registry._idle[("t", "g")]) == offers  # given back ahead of the one after them
    assert [o.wake.woken for o in offers] == [0, 0, 0]  # still waiting: nobody to wake
