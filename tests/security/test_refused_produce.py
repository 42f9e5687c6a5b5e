"""A refused produce creates no topic: a topic is auto-created only by a produce that stores
its batch, whatever refuses it (a bad item, another line's topic, a missing group, a limit)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from tests.conftest import Api, make_api
from tests.support.api import expect_error, produce
from topics.models import Topic


@pytest.fixture
def producer(shop: Any) -> Api:
    """A token of the shop that may produce to any topic (of its line)."""
    return make_api(["produce:*"], shop)


@pytest.fixture
def theirs(outsider_api: Any) -> str:
    produce(outsider_api, {"topic": "theirs", "data": 1})
    return "theirs"


@pytest.mark.django_db(
    transaction=True
)  # the refusal must undo a committed creation, not a test savepoint
def test_a_produce_refused_for_another_lines_topic_creates_none_of_its_new_topics(
    producer: Api, theirs: str
) -> None:
    answer = producer.post(
        "/api/v1/messages",
        {"messages": [{"topic": "fresh", "data": 1}, {"topic": theirs, "data": 2}]},
    )

    expect_error(answer, 404, "not_found")  # another line's topic answers as a missing one
    assert not Topic.objects.filter(name="fresh").exists()


@override_settings(MQ_AUTO_CREATE_GROUPS=False)
@pytest.mark.django_db(transaction=True)
def test_a_produce_refused_for_a_missing_group_creates_no_topic(producer: Api) -> None:
    answer = producer.post(
        "/api/v1/messages", {"messages": [{"topic": "fresh", "group": "nope", "data": 1}]}
    )

    assert answer.status_code == 404, answer.content
    assert not Topic.objects.filter(name="fresh").exists()


@pytest.mark.parametrize(
    "body",
    [
        {
            "messages": [
                {"topic": "fresh", "data": 1},
                {"topic": "fresh", "data": 1, "delay_seconds": "soon"},
            ]
        },
        {"messages": [{"topic": "fresh", "data": "x" * (256 * 1024 + 1)}]},
        {"messages": [{"topic": "fresh", "data": n} for n in range(1001)]},
        {
            "messages": [{"topic": "fresh", "data": 1}],
            "transaction": {"check_url": "http://10.0.0.1/x"},
        },
        {
            "messages": [{"topic": "fresh", "data": 1}, {"topic": "elsewhere", "data": 1}]
        },  # no scope for it
    ],
)
def test_a_produce_refused_for_its_items_or_a_limit_creates_no_topic(
    body: dict[str, Any], shop: Any
) -> None:
    api = make_api(["produce:fresh"], shop)

    answer = api.post("/api/v1/messages", body)

    assert 400 <= answer.status_code < 500, answer.content
    assert not Topic.objects.filter(name="fresh").exists()


def test_a_produce_that_stores_its_batch_creates_its_topic(producer: Api) -> None:
    produce(producer, {"topic": "fresh", "data": 1})

    assert Topic.objects.get(name="fresh").biz.name == "shop"
