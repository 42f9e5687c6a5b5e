"""Unpausing a topic wakes the pulls waiting on its groups (they need not wait out their
fallback re-check, 20 s by default)."""

from __future__ import annotations

import time

import pytest

from registry.wakeups import wakeup_hub
from topics.models import Topic, TopicGroup
from topics.services import topic_update


@pytest.mark.django_db(transaction=True)
def test_unpausing_a_topic_wakes_its_waiting_pulls():
    topic = Topic.objects.create(name="paused-orders", paused=True)
    TopicGroup.objects.create(topic=topic, name="billing")
    hub = wakeup_hub()
    with hub.waiter("warm-up", "default"):  # starts the Redis subscriber, which on connecting
        deadline = time.monotonic() + 10  # wakes every waiter once: let that pass first
        while not hub.connected and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
    with hub.waiter("paused-orders", "billing") as wake:
        topic_update(actor="test", topic=topic, settings={"owner": "ops"})
        assert not wake.is_set(), "a change that keeps the topic paused woke the pull"
        topic_update(actor="test", topic=topic, settings={"paused": False})
        assert wake.wait(2), "unpausing did not wake the waiting pull"
