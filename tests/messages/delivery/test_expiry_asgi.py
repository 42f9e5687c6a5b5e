"""Expiry through the broker's ASGI application: a waiting pull gets past a run of expired
messages (each claim expires a bounded number and the long-poll looks again at once)."""

from __future__ import annotations

import pytest

from messages.models import Message, Status
from tests.conftest import Api
from tests.messages.delivery.test_expiry import age
from tests.support.api import produce, pull

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("through_asgi")]


def test_a_waiting_pull_gets_past_more_expired_messages_than_it_asks_for(
    producer_api: Api, consumer_api: Api
) -> None:
    stored = produce(
        producer_api, *({"topic": "orders", "data": n, "ttl_seconds": 300} for n in range(40))
    )
    age([m["id"] for m in stored[:38]])
    # Each claim expires a bounded number of rows, and the long-poll looks again at once.
    delivered = pull(consumer_api, "orders", max_messages=2, wait_seconds=10)
    assert [m["id"] for m in delivered] == [m["id"] for m in stored[38:]]
    assert Message.objects.filter(status=Status.EXPIRED).count() == 38
