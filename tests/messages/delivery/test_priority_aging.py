"""Priority aging (MQ_PRIORITY_AGING_SECONDS): a waiting message's effective priority rises a
level per that many seconds, so a priority-0 message is not starved by a stream of 9s; off,
the claim is plain priority order."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from messages.delivery.claims.aging import effective_priority
from messages.models import Message
from tests.conftest import Api
from tests.support.api import produce, pull

pytestmark = pytest.mark.django_db


def waited(message_id: int, seconds: float) -> None:
    Message.objects.filter(id=message_id).update(effect_time=timezone.now() - timedelta(seconds=seconds))


def test_an_old_low_priority_message_goes_before_fresh_high_ones_once_aged(producer_api: Api, consumer_api: Api):
    [low] = produce(producer_api, {"topic": "orders", "data": "low", "priority": 0})
    waited(low["id"], 95)  # 9 levels at 10 s each: effectively 9, and older than the 9s
    highs = [m["id"] for m in produce(producer_api, *({"topic": "orders", "data": n, "priority": 9} for n in range(5)))]
    mid = produce(producer_api, {"topic": "orders", "data": "mid", "priority": 5})[0]["id"]
    waited(mid, 25)  # 5 + 2 = 7: after the 9s

    with override_settings(MQ_PRIORITY_AGING_SECONDS=10):
        first = pull(consumer_api, "orders", consumer="c1", max_messages=1)
        rest = pull(consumer_api, "orders", consumer="c2", max_messages=10)
    assert [m["id"] for m in first] == [low["id"]]
    assert sorted(m["id"] for m in rest[:5]) == sorted(highs) and rest[5]["id"] == mid


def test_without_aging_the_claim_is_plain_priority_order(producer_api: Api, consumer_api: Api):
    [low] = produce(producer_api, {"topic": "orders", "data": "low", "priority": 0})
    waited(low["id"], 3600)
    highs = produce(producer_api, *({"topic": "orders", "data": n, "priority": 9} for n in range(3)))
    got = pull(consumer_api, "orders", consumer="c1", max_messages=10)
    assert [m["id"] for m in got] == [m["id"] for m in highs] + [low["id"]]


def test_the_effective_priority_rises_a_level_per_period_up_to_nine():
    now = timezone.now()
    assert [effective_priority(0, now - timedelta(seconds=s), now, 10) for s in (0, 9.9, 10, 35, 10_000)] == [
        0, 0, 1, 3, 9]
    assert effective_priority(4, now + timedelta(seconds=5), now, 10) == 4  # not due yet: no age


@pytest.mark.django_db(transaction=True)
def test_an_aged_claim_in_autocommit_takes_its_rows_in_the_claims_own_sql_transaction():
    """No test transaction around it: the claim's START TRANSACTION ... COMMIT, as in a broker."""
    from messages.delivery.claims import messages_claim
    from messages.delivery.produce import ProduceItem, messages_produce
    from mqcenter.core.auth import Principal

    broker = Principal(name="test", scopes=("admin",), biz_ids=None)
    [low] = messages_produce(principal=broker, items=[ProduceItem(topic="aged", data="0", priority=0)])
    waited(low.id, 95)
    messages_produce(principal=broker, items=[ProduceItem(topic="aged", data="9", priority=9) for _ in range(3)])
    with override_settings(MQ_PRIORITY_AGING_SECONDS=10):
        first = messages_claim(principal=broker, topic="aged", group="default", consumer="c1", max_messages=1).messages
        rest = messages_claim(principal=broker, topic="aged", group="default", consumer="c2", max_messages=10).messages
    assert [m.id for m in first] == [low.id] and len(rest) == 3
    assert Message.objects.filter(topic="aged", status="RUNNING").count() == 4
