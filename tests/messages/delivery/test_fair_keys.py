"""Fair delivery across keys (a queue group's `fair_keys`): claims take the keys' messages
round-robin from a cursor on the group's row, so one key's burst does not hold back another
key's message by more than one claim; groups without the option claim as before."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from messages.delivery.claims import messages_claim
from messages.delivery.produce import ProduceItem, messages_produce
from messages.delivery.pull_many import PullSpec, messages_pull_many
from messages.models import Message, Status
from mqcenter.core.auth import Principal
from tests.support.api import expect_error
from topics.models import Topic, TopicGroup

pytestmark = pytest.mark.django_db

BROKER = Principal(name="test", scopes=("admin",), biz_ids=None)


@pytest.fixture
def tenants(shop) -> Topic:
    """Topic `tenants` with a fair group and a plain one, both subscribed."""
    topic = Topic.objects.create(name="tenants", biz=shop)
    TopicGroup.objects.create(topic=topic, name="fair", fair_keys=True)
    TopicGroup.objects.create(topic=topic, name="plain")
    return topic


def publish(*keys: str | None, priority: int | None = None) -> None:
    """One publish per key given, in order (copied to both groups)."""
    for start in range(0, len(keys), 1000):
        items = [ProduceItem(topic="tenants", data=str(start + n), key=key,
                             **({"priority": priority} if priority is not None else {}))
                 for n, key in enumerate(keys[start:start + 1000])]
        messages_produce(principal=BROKER, items=items)


def claim(group: str, count: int, consumer: str = "c1") -> list[tuple[str | None, int]]:
    """The (key, data) of what one claim hands over, in claim order."""
    got = messages_claim(principal=BROKER, topic="tenants", group=group, consumer=consumer,
                         max_messages=count).messages
    return [(m.key, int(m.data)) for m in got]


def keys_of(claimed: list[tuple[str | None, int]]) -> list[str | None]:
    return [key for key, _ in claimed]


def test_one_keys_burst_does_not_hold_back_another_keys_message(tenants):
    publish(*["A"] * 5000, "B")
    fair = claim("fair", 10)
    assert "B" in keys_of(fair) and len(fair) == 10
    assert keys_of(claim("plain", 10)) == ["A"] * 10  # without the option: B waits behind 5,000
    # The rest of A's burst keeps its order.
    assert [data for key, data in fair if key == "A"] == list(range(9))
    assert [data for _, data in claim("fair", 3)] == [9, 10, 11]


def test_a_claim_takes_one_message_per_key_per_round(tenants):
    publish(*["A"] * 5, *["B"] * 5, *["C"] * 5)  # A's 0-4, B's 5-9, C's 10-14
    assert claim("fair", 7) == [("A", 0), ("B", 5), ("C", 10), ("A", 1), ("B", 6), ("C", 11), ("A", 2)]
    # The cursor stands on A: the next claim starts with B.
    assert claim("fair", 4) == [("B", 7), ("C", 12), ("A", 3), ("B", 8)]


def test_the_cursor_wraps_round_the_keys(tenants):
    publish("C", "A", "B", "A", "B", "C")
    assert keys_of(claim("fair", 2)) == ["A", "B"]
    assert claim("fair", 2) == [("C", 0), ("A", 3)]  # after B: C, then from the start again
    assert claim("fair", 5) == [("B", 4), ("C", 5)]
    assert claim("fair", 5) == []
    assert TopicGroup.objects.get(name="fair").fair_after == "kC"


def test_messages_without_a_key_are_one_key_of_their_own(tenants):
    publish(None, None, None, "A", "A", None)
    assert claim("fair", 3) == [(None, 0), ("A", 3), (None, 1)]
    assert claim("fair", 3) == [("A", 4), (None, 2), (None, 5)]


def test_keys_whose_messages_are_not_due_are_passed_over(tenants):
    publish("A", "B", "C")
    later = timezone.now() + timedelta(hours=1)
    Message.objects.filter(group_name="fair", key="B").update(effect_time=later)
    assert keys_of(claim("fair", 5)) == ["A", "C"]


def test_a_claim_moves_the_cursor_past_keys_with_only_delayed_messages(tenants):
    publish("D0", "D1", "D2", "D3", "D4", "D5", "Z")
    later = timezone.now() + timedelta(hours=1)
    Message.objects.filter(group_name="fair", key__startswith="D").update(effect_time=later)
    assert claim("fair", 1) == []  # four passes of one key (no key first), none due
    assert TopicGroup.objects.get(name="fair").fair_after == "kD2"
    assert claim("fair", 1) == [("Z", 6)]


def test_an_expired_head_of_a_key_ends_expired_and_the_next_one_goes(tenants):
    publish("A", "A", "B")
    Message.objects.filter(group_name="fair", data="0").update(expires_at=timezone.now() - timedelta(seconds=1))
    assert claim("fair", 2) == [("A", 1), ("B", 2)]
    assert Message.objects.get(group_name="fair", data="0").status == Status.EXPIRED


def test_fair_claims_do_not_use_priority(tenants):
    publish("A", "A")
    publish("B", priority=9)
    assert keys_of(claim("fair", 3)) == ["A", "B", "A"]
    assert keys_of(claim("plain", 3)) == ["B", "A", "A"]


def test_a_group_without_the_option_claims_as_before(tenants):
    publish("A", "B", "A")
    with CaptureQueriesContext(connection) as plain:
        assert claim("plain", 3) == [("A", 0), ("B", 1), ("A", 2)]
    # The topic cache reads every column of the group rows; the claim's own statements:
    claim_sql = " ".join(q["sql"] for q in plain.captured_queries if "topics_topicgroup`.`id`" not in q["sql"]
                         and 'topics_topicgroup"."id"' not in q["sql"])
    assert not [text for text in ("fair_after", "ix_msg_fair", "GROUP BY", "UNION") if text in claim_sql]
    assert "FOR UPDATE SKIP LOCKED" in claim_sql or connection.vendor == "sqlite"
    assert TopicGroup.objects.get(name="plain").fair_after is None


def test_woken_pulls_of_a_fair_group_claim_one_by_one(tenants):
    publish("A", "B")
    specs = [PullSpec(BROKER, "tenants", "fair", f"c{i}", 10) for i in range(2)]
    assert messages_pull_many(specs, [5.0, 5.0]) == [None, None]  # each claims alone, fairly
    assert messages_pull_many([PullSpec(BROKER, "tenants", "plain", "c1", 10)], [5.0])[0] is not None


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif("connection.vendor == 'sqlite'", reason="SQLite serializes writers: nothing to race")
def test_two_concurrent_claimers_never_take_the_same_message():
    topic = Topic.objects.create(name="tenants")
    TopicGroup.objects.create(topic=topic, name="fair", fair_keys=True)
    publish(*[k for _ in range(50) for k in ("A", "B", "C", None)])
    taken: list[list[int]] = [[], []]
    start = threading.Barrier(2)

    def consume(index: int) -> None:
        try:
            start.wait(timeout=30)
            while True:
                got = messages_claim(principal=BROKER, topic="tenants", group="fair", consumer=f"c{index}",
                                     max_messages=7).messages
                if not got:
                    return
                taken[index] += [m.id for m in got]
        finally:
            connection.close()

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    every = taken[0] + taken[1]
    assert len(every) == len(set(every)) == 200 and taken[0] and taken[1]
    assert Counter(Message.objects.filter(status=Status.RUNNING).values_list("lease_owner", flat=True)) == {
        "c0": len(taken[0]), "c1": len(taken[1])}


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif("connection.vendor == 'sqlite'", reason="SQLite has no row locks")
def test_a_row_another_transaction_holds_is_skipped_not_waited_for():
    from django.db import transaction

    topic = Topic.objects.create(name="tenants")
    TopicGroup.objects.create(topic=topic, name="fair", fair_keys=True)
    publish("A", "B", "C")
    held = Message.objects.get(key="A").id
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                list(Message.objects.select_for_update().filter(id=held))
                locked.set()
                release.wait(timeout=60)
        finally:
            connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert locked.wait(timeout=30)
        assert keys_of(claim("fair", 3)) == ["B", "C"]  # A's row is skipped, not waited for
    finally:
        release.set()
        holder.join(timeout=60)
    assert claim("fair", 3) == [("A", 0)]


def test_the_api_sets_and_shows_the_option_and_refuses_a_bad_value(admin_api, tenants):
    body = admin_api.patch("/api/v1/topics/tenants/groups/plain", {"fair_keys": True}).json()
    assert body["fair_keys"] is True and TopicGroup.objects.get(name="plain").fair_keys
    created = admin_api.post("/api/v1/topics/tenants/groups", {"group": "new", "fair_keys": True})
    assert created.status_code == 201 and created.json()["fair_keys"] is True
    assert admin_api.get("/api/v1/topics/tenants/groups/fair").json()["fair_keys"] is True
    expect_error(admin_api.patch("/api/v1/topics/tenants/groups/fair", {"fair_keys": "yes"}), 400,
                 "invalid_request", "fair_keys")
    expect_error(admin_api.post("/api/v1/topics/tenants/groups", {"group": "x", "fair_keys": 1}), 400,
                 "invalid_request", "fair_keys")
    assert not TopicGroup.objects.filter(name="x").exists() and TopicGroup.objects.get(name="fair").fair_keys
