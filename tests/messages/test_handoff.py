"""Hand-off (messages/services/handoff.py): a produce gives its messages to the pulls idle-
waiting in this process, inserted leased to them (the row holds the "pulled" trace event,
`pulled_at`, as a claim's row does), and every way that can go wrong leaves each message
accounted for.

The pulls are real long-polls through the broker's ASGI application (the fast path), on its
event loop in another thread; the produces run in the test's thread or in threads of their
own, each with its own database connection. A produce is held, its pulls reserved, with a
real table lock on the message table (its INSERT waits), as test_combined_claims holds
claims on the trace table.
"""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from messages.models import Message, MessageTrace, Status, TraceEvent
from messages.selectors import message_trace
from messages.services import ProduceItem, messages_produce
from messages.services.handoff import HandOffs, Offer, Reservation, handoffs, reserved_shares
from mqcenter.core import metrics
from tests.api.helpers import produce
from tests.conftest import Api, make_api
from tests.messages.test_combined_claims import _blocked_on_table, _raw_connection, _wait_for
from tests.messages.test_concurrency import BROKER
from tests.support.asgi import AsgiClient
from topics.cache import topic_cache
from topics.models import DeliveryMode, TopicGroup

pytestmark = pytest.mark.django_db(transaction=True)

MESSAGE_TABLE = Message._meta.db_table


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
    """The message's trace after "produced", as the trace view shows it (a hand-off's
    "pulled" event is read off the row)."""
    trace = message_trace(Message.objects.get(id=message_id))
    return [(e.event, e.actor, e.at) for e in trace if e.event != TraceEvent.PRODUCED]


class HeldProduce:
    """A produce in its own thread, held at its INSERT (its pulls reserved) by a lock on the
    message table."""

    def __init__(self, topic: str, count: int = 1) -> None:
        self.lock_conn = _raw_connection()
        self.lock_conn.cursor().execute(f"LOCK TABLES {MESSAGE_TABLE} WRITE")
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
        _wait_for(lambda: self._blocked() is not None, "the produce to wait on the lock")

    def _blocked(self) -> int | None:
        return _blocked_on_table(self.lock_conn, MESSAGE_TABLE)

    def kill(self) -> None:
        self.lock_conn.cursor().execute(f"KILL {int(self._blocked())}")

    def release(self) -> None:
        self.lock_conn.cursor().execute("UNLOCK TABLES")
        self.thread.join(timeout=30)
        self.lock_conn.close()
        assert not self.thread.is_alive(), "the produce hung"


def test_an_idle_pull_is_handed_the_message_leased_and_traced_by_the_produce_insert(producer_api, consumer):
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
    assert (stored.pulled_at, stored.handed_to) == (stored.add_time, None)  # held as a claim's pull is
    assert got["lease_expires_at"] == stored.lease_expires_at.isoformat().replace("+00:00", "Z")
    assert got["effect_time"] == stored.effect_time.isoformat().replace("+00:00", "Z")
    # Produced and pulled are both the row's: one time for both, and no trace row.
    events = _events(entry["id"])
    assert [(e, actor) for e, actor, _ in events] == [(TraceEvent.PULLED, "c1")]
    assert events[0][2] == stored.add_time
    assert not MessageTrace.objects.filter(message_id=entry["id"]).exists()
    assert _handed("orders") == before + 1


def test_a_hand_off_records_the_pulls_rank_and_a_redelivery_writes_it_out(producer_api, consumer):
    # Registered consumers, in a group of their own (ranks are read through a one-second
    # per-group cache): c1 ranks 0 of 2.
    for name in ("c1", "c2"):
        answer = consumer.post("/api/v1/registry/consumers", {"consumer": name, "subscriptions": [
            {"topic": "orders", "group": "ranked"}]})
        assert answer.status_code == 200, answer.content
    produce(producer_api, {"topic": "orders", "group": "ranked", "data": "first"})
    Message.objects.all().delete()
    pull = WaitingPull(consumer, "orders", "c1", group="ranked")
    _waiting("orders", 1, group="ranked")

    [entry] = produce(producer_api, {"topic": "orders", "group": "ranked", "data": 1, "retry_count": 1})

    [got] = pull.messages()
    trace = message_trace(Message.objects.get(id=entry["id"]))
    assert [(e.event, e.actor, e.attempt, e.rank, e.total) for e in trace] == [
        (TraceEvent.PRODUCED, "produce:orders*", 0, None, None), (TraceEvent.PULLED, "c1", 1, 0, 2)]
    # A nack, then c2's claim: the hand-off's pull is written out as it was, then c2's is held.
    answer = consumer.post("/api/v1/ack", {"consumer": "c1", "results": [
        {"id": got["id"], "status": "FAIL", "log": "again"}]})
    assert answer.json()["results"][0]["outcome"] == "retry_scheduled"
    Message.objects.filter(id=entry["id"]).update(effect_time=timezone.now())
    [again] = consumer.post("/api/v1/pull", {"topic": "orders", "group": "ranked", "consumer": "c2",
                                             "max_messages": 1}).json()["messages"]
    assert again["id"] == entry["id"] and again["attempt"] == 2
    assert list(MessageTrace.objects.filter(message_id=entry["id"], event=TraceEvent.PULLED)
                .values_list("actor", "attempt", "rank", "total", "at")) == [("c1", 1, 0, 2, trace[1].at)]
    trace = message_trace(Message.objects.get(id=entry["id"]))
    assert [(e.event, e.actor, e.attempt, e.rank) for e in trace if e.event != TraceEvent.PRODUCED] == [
        (TraceEvent.PULLED, "c1", 1, 0), (TraceEvent.NACKED, "c1", 1, None),
        (TraceEvent.RETRY_SCHEDULED, "c1", 1, None), (TraceEvent.PULLED, "c2", 2, 1)]


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
    [(_, _, pulled)] = _events(delayed["id"])
    assert (pulled - Message.objects.get(id=delayed["id"]).add_time).total_seconds() >= 0.3
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
    assert [e for e, _, _ in _events(held.ids[0])] == [TraceEvent.PULLED, TraceEvent.RELEASED]


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


# --- across processes: the board in Redis ------------------------------------------------------


@pytest.fixture(autouse=True)
def _empty_board() -> Any:
    """No ticket left over from an earlier test (or run) of this database takes a message."""
    from messages.services.handoff import offer_board

    found = offer_board()
    assert found is not None, "the test settings set REDIS_URL"
    for key in found._client.scan_iter(f"{found.prefix}*"):
        found._client.delete(key)
    yield
    for key in found._client.scan_iter(f"{found.prefix}*"):
        found._client.delete(key)


@pytest.fixture
def board() -> Any:
    from messages.services.handoff import offer_board

    found = offer_board()
    assert found is not None, "the test settings set REDIS_URL"
    _wait_for(lambda: found.receiving(), "the wake-up subscriber to connect")
    return found


def _tickets(board: Any, topic: str, group: str = "default") -> list[Any]:
    from messages.services.handoff import Ticket

    return [Ticket(*raw.decode().split("|", 5)) for raw in board._client.lrange(board.key((topic, group)), 0, -1)]


class OtherProcess:
    """A broker process of the same database, seen from Redis: its "alive" key, a ticket of a
    pull waiting in it, and its own channel, on which a test reads what produces send it."""

    def __init__(self, board: Any, topic: str, consumer: str, *, limit: int = 1, alive: bool = True,
                 bizs: list[int] | None = None, announce: bool = True) -> None:
        import json

        import redis

        from registry.wakeups import CHANNEL, alive_key, direct_channel

        self.origin = f"elsewhere:{consumer}"
        self.redis = redis.Redis.from_url(board.url)
        if alive:
            self.redis.set(alive_key(self.origin), 1, ex=30)
        self.pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
        self.pubsub.subscribe(direct_channel(self.origin))
        reach = "*" if bizs is None else ",".join(map(str, bizs))
        ticket = f"{time.time() + 30:.3f}|{limit}|{reach}|{self.origin}|7|{consumer}"
        self.redis.rpush(board.key((topic, "default")), ticket)
        if announce:  # as OfferBoard.list does
            until = time.time() + 35
            self.redis.publish(CHANNEL, json.dumps({"from": self.origin, "pairs": [], "listed": [topic, "default", until]}))
            _wait_for(lambda: board._may_hold.get((topic, "default"), 0) >= until, "the board to hear of the ticket")

    def received(self, timeout: float = 5) -> Any:
        import json

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            item = self.pubsub.get_message(timeout=0.1)
            if item is not None:
                return json.loads(item["data"])
        return None

    def close(self) -> None:
        self.pubsub.close()
        self.redis.close()


def _produce_beside(producer_api: Api, other: OtherProcess) -> tuple[dict[str, Any], Any]:
    """Produce one message of "orders" while `other` has its ticket listed; returns the
    message's entry and what was published to `other` (None: nothing within half a second)."""
    try:
        [entry] = produce(producer_api, {"topic": "orders", "data": 1})
        return entry, other.received(timeout=0.5)
    finally:
        other.close()


def test_a_waiting_pull_is_listed_on_the_board_and_withdrawn_when_its_wait_ends(producer_api, consumer, board):
    produce(producer_api, {"topic": "orders", "data": "first"})
    Message.objects.all().delete()
    pull = WaitingPull(consumer, "orders", "c1", max_messages=3, wait_seconds=0.5)
    _waiting("orders", 1)
    [ticket] = _tickets(board, "orders")
    assert (ticket.process, ticket.consumer, ticket.limit) == (board.origin, "c1", "3")
    assert pull.messages() == []
    assert _tickets(board, "orders") == []


def test_a_produce_hands_to_a_pull_of_another_process_and_publishes_the_messages_to_it(producer_api, board):
    produce(producer_api, {"topic": "orders", "data": "first"})
    Message.objects.all().delete()
    other = OtherProcess(board, "orders", "far-consumer", limit=2)
    try:
        entries = produce(producer_api, *({"topic": "orders", "data": {"n": i}} for i in range(3)))
        sent = other.received()
    finally:
        other.close()
    assert sent is not None, "nothing was published to the pull's process"
    [[offer_id, wire]] = sent["handed"]
    assert offer_id == 7
    ids = [e["id"] for e in entries]
    assert [values[0] for values in wire] == ids[:2]
    rows = {m.id: m for m in Message.objects.filter(id__in=ids)}
    assert [(rows[i].status, rows[i].lease_owner) for i in ids] == [
        (Status.RUNNING, "far-consumer"), (Status.RUNNING, "far-consumer"), (Status.NEW, None)]
    # What the other process answers is the stored row, times and all.
    from messages.services.handoff import message_from_wire

    handed = message_from_wire(wire[0])
    stored = rows[ids[0]]
    assert (handed.data, handed.lease_expires_at, handed.effect_time, handed.attempt) == (
        stored.data, stored.lease_expires_at, stored.effect_time, 1)
    events = _events(ids[0])
    assert [(e, actor) for e, actor, _ in events] == [(TraceEvent.PULLED, "far-consumer")]
    assert events[0][2] == stored.add_time  # the row's
    assert _tickets(board, "orders") == []


def test_messages_handed_to_a_process_that_stopped_listening_are_released_at_once(producer_api, board):
    """Killed: its "alive" key outlives it by up to ALIVE_SECONDS, but its channel has no
    subscriber from the moment it died, and the publish says so."""
    produce(producer_api, {"topic": "orders", "data": "first"})
    Message.objects.all().delete()
    other = OtherProcess(board, "orders", "killed-consumer")
    other.close()
    [entry] = produce(producer_api, {"topic": "orders", "data": 1})
    stored = Message.objects.get(id=entry["id"])
    assert (stored.status, stored.attempt, stored.lease_owner) == (Status.NEW, 0, None)
    assert [(e, actor) for e, actor, _ in _events(entry["id"])] == [
        (TraceEvent.PULLED, "killed-consumer"), (TraceEvent.RELEASED, "killed-consumer")]


def test_a_ticket_of_a_process_that_died_is_dropped_not_handed_to(producer_api, board):
    produce(producer_api, {"topic": "orders", "data": "first"})
    Message.objects.all().delete()
    entry, sent = _produce_beside(producer_api, OtherProcess(board, "orders", "dead-consumer", alive=False))
    assert sent is None
    assert Message.objects.get(id=entry["id"]).status == Status.NEW
    assert _tickets(board, "orders") == []


@pytest.mark.parametrize(("announced", "subscribed_lately"), [(True, False), (False, False), (False, True)])
def test_a_produce_takes_tickets_only_of_pairs_known_to_hold_some(producer_api, board, monkeypatch, announced,
                                                                   subscribed_lately):
    """Known: announced, or (for tickets listed before this process could hear) in a list
    when this process looked, after subscribing."""
    produce(producer_api, {"topic": "orders", "data": "first"})
    Message.objects.all().delete()
    board._may_hold.clear()
    # -1: not looked at the lists since subscribing; else heard every notice since then.
    monkeypatch.setattr(board, "_heard_since", -1.0 if subscribed_lately else time.monotonic())
    entry, sent = _produce_beside(producer_api, OtherProcess(board, "orders", "c-far", announce=announced))
    if announced or subscribed_lately:
        assert sent is not None and Message.objects.get(id=entry["id"]).status == Status.RUNNING
    else:  # the board was left alone: the ticket stays, the message waits for a claim
        assert sent is None and Message.objects.get(id=entry["id"]).status == Status.NEW
        assert [t.consumer for t in _tickets(board, "orders")] == ["c-far"]


def test_a_pull_of_this_process_counts_as_announced_the_moment_it_lists(producer_api, consumer, board, monkeypatch):
    produce(producer_api, {"topic": "orders", "data": "first"})
    Message.objects.all().delete()
    board._may_hold.clear()
    board._announced.clear()
    monkeypatch.setattr(board, "_heard_since", time.monotonic())
    pull = WaitingPull(consumer, "orders", "c1", wait_seconds=5)
    _waiting("orders", 1)
    before = _handed("orders")
    [entry] = produce(producer_api, {"topic": "orders", "data": 1})
    assert [m["id"] for m in pull.messages()] == [entry["id"]]
    assert _handed("orders") == before + 1  # handed off, not woken to claim


def test_a_ticket_whose_token_may_not_reach_the_topic_stays_for_another_produce(producer_api, board):
    produce(producer_api, {"topic": "orders", "data": "first"})
    Message.objects.all().delete()
    other_biz = (topic_cache.get("orders").biz_id or 0) + 1000
    entry, sent = _produce_beside(producer_api, OtherProcess(board, "orders", "foreign-consumer", bizs=[other_biz]))
    assert sent is None
    assert Message.objects.get(id=entry["id"]).status == Status.NEW
    assert [t.consumer for t in _tickets(board, "orders")] == ["foreign-consumer"]


def test_the_board_takes_from_the_head_and_leaves_what_it_may_not_take_in_order(board):
    """Both scripts rewrite the head of the list they read: what stays keeps its order and the
    list keeps its expiry. Dropped: a ticket whose wait is over, one of a process that died."""
    from registry.wakeups import alive_key

    pair, client, ends = ("board-scripts", "default"), board._client, time.time() + 30
    key = board.key(pair)
    client.delete(key)
    for process in ("alive-a", "alive-b", board.origin):
        client.set(alive_key(process), 1, ex=30)

    def ticket(process: str, offer: int, *, bizs: str = "*", until: float = ends) -> str:
        return f"{until:.3f}|1|{bizs}|{process}|{offer}|c{offer}"

    listed = [ticket("alive-a", 1), ticket(board.origin, 2), ticket("alive-a", 3, until=ends - 60),
              ticket("gone", 4), ticket("alive-b", 5, bizs="999999"), ticket("alive-b", 6), ticket("alive-a", 7),
              *(ticket("alive-a", n) for n in range(8, 508)), ticket(board.origin, 508)]
    client.rpush(key, *listed)
    client.expire(key, 100)
    taken = board.take(pair, 3, None, leave=board.origin)
    assert [int(t.offer) for t in taken] == [1, 6, 7]
    stays = [listed[1], listed[4], *listed[7:]]
    assert [raw.decode() for raw in client.lrange(key, 0, -1)] == stays
    assert 90 < client.ttl(key) <= 100

    async def withdraw(tickets: list[str]) -> list[bool]:
        return await board.withdraw_many(pair, tickets)

    far = [listed[n] for n in (300, 9, 507)]  # offers 301, 10 and 508: out of order, one at the tail
    assert asyncio.run(withdraw([*far, ticket("alive-a", 1), listed[1]])) == [True, True, True, False, True]
    assert [raw.decode() for raw in client.lrange(key, 0, -1)] == [t for t in stays if t not in (*far, listed[1])]
    assert 90 < client.ttl(key) <= 100
    # Read to its end, emptied and pushed back: it still expires.
    client.delete(key)
    client.rpush(key, listed[1], listed[0])
    client.expire(key, 100)
    assert [int(t.offer) for t in board.take(pair, 5, None, leave=board.origin)] == [1]
    assert [raw.decode() for raw in client.lrange(key, 0, -1)] == [listed[1]]
    assert 90 < client.ttl(key) <= 100
    client.delete(key)


def test_a_ticket_whose_token_reaches_the_topics_business_line_is_taken(producer_api, board):
    produce(producer_api, {"topic": "orders", "data": "first"})
    Message.objects.all().delete()
    biz = topic_cache.get("orders").biz_id
    assert biz is not None
    entry, sent = _produce_beside(producer_api, OtherProcess(board, "orders", "inside-consumer", bizs=[biz + 1000, biz]))
    assert sent is not None and [values[0] for values in sent["handed"][0][1]] == [entry["id"]]
    assert Message.objects.get(id=entry["id"]).lease_owner == "inside-consumer"


def _pull_taken_elsewhere(producer_api: Api, consumer: Api, board: Any, *, wait_seconds: float) -> tuple[WaitingPull, Any]:
    """A pull of consumer c1 waiting on "orders" (nothing else there), and its ticket, taken as
    a produce in another process would take it."""
    produce(producer_api, {"topic": "orders", "data": "first"})
    Message.objects.all().delete()
    pull = WaitingPull(consumer, "orders", "c1", wait_seconds=wait_seconds)
    _waiting("orders", 1)
    [ticket] = board.take(("orders", "default"), 1, topic_cache.get("orders").biz_id)
    return pull, ticket


def _leased_as_handed(topic: str, consumer: str) -> Message:
    """A message committed leased to `consumer`, as another process's hand-off commits it
    (stored inside a transaction, so that no pull of this process is handed it)."""
    with transaction.atomic():
        [result] = messages_produce(principal=BROKER, items=[ProduceItem(topic=topic, data='{"far": true}')])
    Message.objects.filter(id=result.id).update(status=Status.RUNNING, lease_owner=consumer, attempt=1,
                                                 lease_expires_at=timezone.now() + timedelta(seconds=60))
    return Message.objects.get(id=result.id)


def _send_outcome(board: Any, ticket: Any, messages: list[Message] | None) -> None:
    import json

    from messages.services.handoff import message_to_wire
    from registry.wakeups import wakeup_hub

    handed = None if messages is None else [message_to_wire(m) for m in messages]
    wakeup_hub().send_direct(ticket.process, json.dumps({"handed": [[int(ticket.offer), handed]]}))


@pytest.mark.parametrize("sender", ["before session 12: no field names", "another version: named fields"])
def test_a_hand_off_from_a_process_of_another_version_is_answered(producer_api, consumer, board, sender):
    """A rolling upgrade: the producing process may run a version whose messages have other
    fields. Older processes send this version's first fields positionally; newer ones name
    theirs (here in another order, one unknown here, `handed_to` missing)."""
    import json

    from messages.services.handoff import _FIELDS, message_to_wire
    from registry.wakeups import wakeup_hub

    pull, ticket = _pull_taken_elsewhere(producer_api, consumer, board, wait_seconds=20)
    message = _leased_as_handed("orders", "c1")
    values = dict(zip(_FIELDS, message_to_wire(message), strict=True))
    if sender.startswith("before"):
        payload = {"handed": [[int(ticket.offer), [[values[name] for name in _FIELDS if name != "handed_to"]]]]}
    else:
        fields = [name for name in reversed(_FIELDS) if name != "handed_to"]
        payload = {"fields": [*fields, "shard"],
                   "handed": [[int(ticket.offer), [[*(values[name] for name in fields), 7]]]]}
    wakeup_hub().send_direct(ticket.process, json.dumps(payload))
    [got] = pull.messages()
    assert (got["id"], got["data"], got["attempt"]) == (message.id, {"far": True}, 1)
    assert got["lease_expires_at"] == message.lease_expires_at.isoformat().replace("+00:00", "Z")


def test_a_pull_whose_ticket_was_taken_elsewhere_waits_past_its_wait_for_the_outcome(producer_api, consumer, board):
    pull, ticket = _pull_taken_elsewhere(producer_api, consumer, board, wait_seconds=0.3)
    message = _leased_as_handed("orders", "c1")
    time.sleep(0.6)  # the wait is over; withdrawing the ticket failed, so it waits for the outcome
    assert not pull.future.done()
    _send_outcome(board, ticket, [message])
    [got] = pull.messages()
    assert (got["id"], got["data"], got["attempt"]) == (message.id, {"far": True}, 1)
    assert got["lease_expires_at"] == message.lease_expires_at.isoformat().replace("+00:00", "Z")


def test_a_failed_produce_elsewhere_sends_the_pull_round_again(producer_api, consumer, board):
    pull, ticket = _pull_taken_elsewhere(producer_api, consumer, board, wait_seconds=20)
    _send_outcome(board, ticket, None)
    _waiting("orders", 1)  # listed again, open to the next produce
    [entry] = produce(producer_api, {"topic": "orders", "data": 2})
    assert [m["id"] for m in pull.messages()] == [entry["id"]]


@pytest.mark.parametrize("how", ["cancelled", "outcome too late"])
def test_messages_handed_to_a_pull_that_stopped_waiting_are_released(producer_api, consumer, board, how):
    pull, ticket = _pull_taken_elsewhere(producer_api, consumer, board, wait_seconds=20 if how == "cancelled" else 0.2)
    message = _leased_as_handed("orders", "c1")
    if how == "cancelled":
        pull.future.cancel()
        _wait_for(lambda: pull.future.done(), "the pull to end")
    else:
        assert pull.messages() == []  # gave up after its wait plus OUTCOME_SECONDS
    _send_outcome(board, ticket, [message])
    _wait_for(lambda: Message.objects.get(id=message.id).status == Status.NEW, "the late hand-off to be released")
    released = Message.objects.get(id=message.id)
    assert (released.attempt, released.lease_owner) == (0, None)
    assert [e for e, _, _ in _events(message.id)][-1] == TraceEvent.RELEASED


def test_a_produce_takes_a_pull_of_its_own_process_in_memory_and_withdraws_its_ticket_after(
        producer_api, consumer, board, monkeypatch):
    pull = WaitingPull(consumer, "orders", "c1", wait_seconds=20)
    _waiting("orders", 1)
    [ticket] = _tickets(board, "orders")
    assert ticket.process == board.origin

    def no_take(*args: Any) -> Any:
        raise AssertionError("the board's script was run for a pull of this process")

    monkeypatch.setattr(board, "take", no_take)
    remembered = set(handoffs._served)  # earlier tests' pulls whose tickets were taken elsewhere
    [entry] = produce(producer_api, {"topic": "orders", "data": 1})
    assert [m["id"] for m in pull.messages()] == [entry["id"]]
    _wait_for(lambda: _tickets(board, "orders") == [], "the ticket to be withdrawn")
    _wait_for(lambda: set(handoffs._served) <= remembered, "the pull to be forgotten once its ticket is gone")


def test_a_produce_leaves_the_tickets_of_pulls_it_served_here_and_takes_the_next_process_s(
        producer_api, consumer, board, monkeypatch):
    """The board still lists a pull taken in memory until its ticket is withdrawn; taking that
    ticket again would fill the produce's room and leave the other process's pull out."""
    produce(producer_api, {"topic": "orders", "data": "first"})
    Message.objects.all().delete()
    pull = WaitingPull(consumer, "orders", "c1", wait_seconds=20)
    _waiting("orders", 1)
    other = OtherProcess(board, "orders", "far-consumer")  # listed after c1
    withdraw, deferred = handoffs._withdraw_served, []
    # The withdrawal, on the event loop, comes after the produce's take (as it does in a burst).
    monkeypatch.setattr(handoffs, "_withdraw_served", lambda *args: deferred.append(args))
    try:
        here, far = produce(producer_api, {"topic": "orders", "data": 1}, {"topic": "orders", "data": 2})
        sent = other.received()
    finally:
        other.close()
    assert [m["id"] for m in pull.messages()] == [here["id"]]
    assert sent is not None and [values[0] for values in sent["handed"][0][1]] == [far["id"]]
    rows = {m.id: m for m in Message.objects.all()}
    assert (rows[here["id"]].lease_owner, rows[far["id"]].lease_owner) == ("c1", "far-consumer")
    [ticket] = _tickets(board, "orders")
    assert (ticket.process, ticket.consumer) == (board.origin, "c1")
    withdraw(*deferred[0])
    _wait_for(lambda: _tickets(board, "orders") == [], "the served pull's ticket to be withdrawn")


def test_what_another_process_hands_a_pull_already_served_here_is_released(producer_api, consumer, board):
    """The race the in-memory take opens: a produce elsewhere took the pull's ticket just
    before a produce here took the pull itself. The pull answers with this process's message;
    the other process's, arriving after, goes back to NEW at once."""
    pull, ticket = _pull_taken_elsewhere(producer_api, consumer, board, wait_seconds=20)
    [entry] = produce(producer_api, {"topic": "orders", "data": "here"})
    assert [m["id"] for m in pull.messages()] == [entry["id"]]
    far = _leased_as_handed("orders", "c1")
    _send_outcome(board, ticket, [far])
    _wait_for(lambda: Message.objects.get(id=far.id).status == Status.NEW, "the other hand-off to be released")
    released = Message.objects.get(id=far.id)
    assert (released.attempt, released.lease_owner) == (0, None)
    assert [e for e, _, _ in _events(far.id)][-1] == TraceEvent.RELEASED
    served_here = Message.objects.get(id=entry["id"])
    assert (served_here.status, served_here.lease_owner) == (Status.RUNNING, "c1")
