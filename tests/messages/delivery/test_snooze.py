"""Snooze: an ack result with status RETRY and delay_seconds puts the message back for a
later delivery without spending a retry, bounded by MQ_MAX_SNOOZE_SECONDS."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from messages.models import Message, MessageTrace, Status
from tests.conftest import Api
from tests.messages.delivery.test_consume import make_topic
from tests.support.api import ack, expect_error, parse_time, produce, pull
from tests.support.waiting import wait_until

pytestmark = pytest.mark.django_db


def snooze(
    api: Api, message_id: int, seconds: float, consumer: str = "c1", log: str = "busy"
) -> dict[str, Any]:
    return ack(
        api, consumer, {"id": message_id, "status": "RETRY", "delay_seconds": seconds, "log": log}
    )[0]


def pulled_when_due(api: Api) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    wait_until(
        lambda: bool(got.extend(pull(api, "orders", consumer="c1")) or got),
        timeout=10,
        what="the snoozed message to come back",
    )
    return got


def test_a_snooze_spends_no_retry_and_is_redelivered_after_the_delay(
    admin_api: Api, producer_api: Api, consumer_api: Api
) -> None:
    make_topic(admin_api, retry_count=0)  # a FAIL would make it a dead letter at once
    stored = produce(producer_api, {"topic": "orders", "data": 1})[0]
    got = pull(consumer_api, "orders", consumer="c1")
    for attempt in (1, 2, 3):
        assert [(m["id"], m["attempt"], m["retry_remaining"]) for m in got] == [
            (stored["id"], attempt, 0)
        ]
        before = timezone.now()
        outcome = snooze(consumer_api, stored["id"], 0.4)
        assert outcome["outcome"] == "retry_scheduled"
        assert parse_time(outcome["effect_time"]) >= before + timedelta(seconds=0.4)
        assert pull(consumer_api, "orders", consumer="c1") == [], "not before its delay"
        if attempt < 3:
            got = pulled_when_due(consumer_api)
    message = Message.objects.get(id=stored["id"])
    assert (message.status, message.retry_remaining, message.last_log) == (Status.NEW, 0, "busy")
    logs = list(
        MessageTrace.objects.filter(message_id=stored["id"], event="retry_scheduled").values_list(
            "log", "actor"
        )
    )
    assert len(logs) == 3 and all(
        log.startswith("snoozed until ") and log.endswith(": busy") and actor == "c1"
        for log, actor in logs
    )


def test_a_repeated_snooze_ack_answers_the_same_and_a_stale_one_changes_nothing(
    producer_api: Api, consumer_api: Api
) -> None:
    stored = produce(producer_api, {"topic": "orders", "data": 1})[0]
    pull(consumer_api, "orders", consumer="c1")
    first = snooze(consumer_api, stored["id"], 60)
    assert snooze(consumer_api, stored["id"], 60) == first
    assert snooze(consumer_api, stored["id"], 60, consumer="c2")["outcome"] == "stale"
    assert Message.objects.get(id=stored["id"]).effect_time == parse_time(first["effect_time"])


def test_a_pull_may_carry_a_snooze(producer_api: Api, consumer_api: Api) -> None:
    stored = produce(producer_api, {"topic": "orders", "data": 1})[0]
    pull(consumer_api, "orders", consumer="c1")
    response = consumer_api.post(
        "/api/v1/pull",
        {
            "topic": "orders",
            "consumer": "c1",
            "max_messages": 5,
            "results": [{"id": stored["id"], "status": "RETRY", "delay_seconds": 60}],
        },
    )
    assert response.status_code == 200, response.content
    assert response.json()["messages"] == []
    assert response.json()["results"][0]["outcome"] == "retry_scheduled"


@pytest.mark.parametrize(
    ("result", "field"),
    [
        ({"status": "RETRY"}, "results[0].delay_seconds"),
        ({"status": "RETRY", "delay_seconds": -1}, "results[0].delay_seconds"),
        ({"status": "RETRY", "delay_seconds": 601}, "results[0].delay_seconds"),
        ({"status": "RETRY", "delay_seconds": "5"}, "results[0].delay_seconds"),
        ({"status": "SUCCESS", "delay_seconds": 5}, "results[0].delay_seconds"),
        ({"status": "LATER", "delay_seconds": 5}, "results[0].status"),
    ],
)
def test_it_refuses_a_bad_snooze_and_changes_nothing(
    producer_api: Api, consumer_api: Api, result: dict[str, Any], field: str
) -> None:
    stored = produce(producer_api, {"topic": "orders", "data": 1})[0]
    pull(consumer_api, "orders", consumer="c1")
    with override_settings(MQ_MAX_SNOOZE_SECONDS=600):
        response = consumer_api.post(
            "/api/v1/ack", {"consumer": "c1", "results": [{"id": stored["id"], **result}]}
        )
    expect_error(response, 400, "invalid_request", field)
    assert Message.objects.get(id=stored["id"]).status == Status.RUNNING
