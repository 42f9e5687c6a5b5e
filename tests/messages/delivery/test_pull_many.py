"""Parked pulls of one (topic, group) claimed for together (messages/delivery/pull_many.py):
every message handed out once, each pull its share in claim order up to its max_messages,
leased to its own consumer; what cannot be claimed together is left to claim alone."""

from __future__ import annotations

import pytest
from django.db import connection

from messages.delivery.pull_many import PullSpec, messages_pull_many
from messages.models import Message
from mqcenter.core.auth import Principal
from tests.support.api import produce, pull
from topics.cache import topic_cache
from topics.models import TopicGroup
from topics.services import group_subscribe

pytestmark = pytest.mark.django_db(transaction=True)


def principal(shop, *scopes):
    return Principal("t", tuple(scopes), frozenset({shop.id}))


def specs(shop, *maxima, topic="orders", group="default", scopes=("consume:orders*",)):
    return [PullSpec(principal(shop, *scopes), topic, group, f"c{i}", m) for i, m in enumerate(maxima)]


def subscribed(topic="orders", group="default"):
    """The group subscribed, as a pull's first attempt leaves it (before it parks)."""
    topic_cache.forget(topic)  # a produce made the topic
    group_subscribe(topic=topic_cache.get(topic), name=group)
    topic_cache.forget(topic)


def commits() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SHOW SESSION STATUS LIKE 'Com_commit'")
        return int(cursor.fetchone()[1])


def test_each_pull_gets_its_share_once_in_claim_order_in_one_commit(shop, producer_api, consumer_api):
    ids = [e["id"] for e in produce(producer_api, *({"topic": "orders", "data": i} for i in range(7)))]
    subscribed()
    before = commits()
    attempts = messages_pull_many(specs(shop, 2, 1, 3, 2, 1), [10.0] * 5)
    assert commits() - before == 1
    shares = [[m.id for m in a.messages] for a in attempts]
    assert shares == [ids[0:2], ids[2:3], ids[3:6], ids[6:7], []]
    assert [a.wait for a in attempts[:4]] == [None] * 4 and attempts[4].wait is not None and attempts[4].wait > 0
    rows = {m.id: m for m in Message.objects.filter(id__in=ids)}
    for i, share in enumerate(shares):
        for message_id in share:
            row = rows[message_id]
            assert (row.status, row.lease_owner, row.attempt) == ("RUNNING", f"c{i}", 1)
            assert row.lease_expires_at is not None and row.pulled_at is not None
    # what the claim handed over is what the rows say
    handed = [m for a in attempts for m in a.messages]
    assert all(m.lease_owner == rows[m.id].lease_owner and m.lease_expires_at == rows[m.id].lease_expires_at
               for m in handed)
    # nothing left: a later claim together finds none, and a pull without wait answers at once
    again = messages_pull_many(specs(shop, 5, 5), [10.0, 0.0])
    assert [a.messages for a in again] == [[], []] and again[0].wait and again[1].wait is None


def test_pulls_that_cannot_be_claimed_together_are_left_to_claim_alone(shop, producer_api, consumer_api):
    ids = [e["id"] for e in produce(producer_api, *({"topic": "orders", "data": i} for i in range(2)))]
    subscribed()
    out_of_scope = PullSpec(principal(shop, "consume:payments"), "orders", "default", "x", 5)
    attempts = messages_pull_many([out_of_scope, *specs(shop, 5)], [10.0, 10.0])
    assert attempts[0] is None
    assert [m.id for m in attempts[1].messages] == ids
    # a serial group claims one at a time, in its own way: every pull is left alone
    TopicGroup.objects.filter(topic__name="orders", name="default").update(mode="serial")
    topic_cache.forget("orders")
    assert messages_pull_many(specs(shop, 1, 1), [10.0, 10.0]) == [None, None]


def test_a_released_message_is_handed_out_again_with_its_earlier_pull_kept(shop, producer_api, consumer_api):
    [entry] = produce(producer_api, {"topic": "orders", "data": 1})
    subscribed()
    [first] = pull(consumer_api, "orders", consumer="early")
    response = consumer_api.post("/api/v1/release", {"consumer": "early", "ids": [first["id"]]})
    assert response.status_code == 200, response.content
    [attempt] = messages_pull_many(specs(shop, 1), [10.0])
    [message] = attempt.messages
    assert message.id == entry["id"] and message.lease_owner == "c0" and message.attempt == 1
