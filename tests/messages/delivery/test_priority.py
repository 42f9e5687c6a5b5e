"""Priority: a queue group delivers higher priorities first; serial and sharded groups keep id
order; bad priorities are refused; the console lists and filters by priority."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from messages.models import Message
from tests.conftest import Api
from tests.messages.delivery.test_consume import make_topic
from tests.support.api import expect_error, produce, pull

pytestmark = pytest.mark.django_db

PRIORITIES = [0, 9, 4, 0, 9, 7, 4, 0]


def produced(api: Api, topic: str = "orders", **fields: Any) -> list[dict[str, Any]]:
    return produce(
        api,
        *({"topic": topic, "data": n, "priority": p, **fields} for n, p in enumerate(PRIORITIES)),
    )


def test_it_delivers_higher_priorities_first_in_a_queue_group(
    producer_api: Api, consumer_api: Api
) -> None:
    stored = produced(producer_api)
    ids = [m["id"] for m in stored]
    first = pull(consumer_api, "orders", consumer="c1", max_messages=3)
    rest = pull(consumer_api, "orders", consumer="c2", max_messages=10)
    expected = [ids[i] for i in sorted(range(len(ids)), key=lambda i: (-PRIORITIES[i], ids[i]))]
    assert [m["id"] for m in first + rest] == expected
    assert dict(Message.objects.values_list("id", "priority")) == dict(
        zip(ids, PRIORITIES, strict=True)
    )


def test_it_keeps_produce_order_for_the_default_priority_and_equal_priorities(
    producer_api: Api, consumer_api: Api
) -> None:
    plain = produce(producer_api, *({"topic": "orders", "data": n} for n in range(3)))
    high = produce(
        producer_api,
        {"topic": "orders", "data": "a", "priority": 6},
        {"topic": "orders", "data": "b", "priority": 6},
    )
    delivered = [m["id"] for m in pull(consumer_api, "orders", max_messages=10)]
    assert delivered == [m["id"] for m in high] + [m["id"] for m in plain]
    assert set(
        Message.objects.filter(id__in=[m["id"] for m in plain]).values_list("priority", flat=True)
    ) == {4}


@pytest.mark.parametrize("mode", ["serial", "sharded"])
def test_it_keeps_id_order_in_serial_and_sharded_groups(
    mode: str, admin_api: Api, producer_api: Api, consumer_api: Api
) -> None:
    make_topic(admin_api, groups=[{"group": "g", "mode": mode}])
    ids = [m["id"] for m in produced(producer_api, group="g", key="k")]
    delivered = []
    for _ in ids:
        got = pull(consumer_api, "orders", group="g", max_messages=10)
        assert len(got) == 1
        delivered.append(got[0]["id"])
        response = consumer_api.post(
            "/api/v1/ack",
            {"consumer": "c1", "results": [{"id": got[0]["id"], "status": "SUCCESS"}]},
        )
        assert response.status_code == 200
    assert delivered == ids


def test_it_does_not_deliver_a_delayed_high_priority_before_it_is_due(
    producer_api: Api, consumer_api: Api
) -> None:
    produce(producer_api, {"topic": "orders", "data": "later", "priority": 9, "delay_seconds": 60})
    low = produce(producer_api, {"topic": "orders", "data": "now", "priority": 0})
    assert [m["id"] for m in pull(consumer_api, "orders", max_messages=10)] == [low[0]["id"]]


@pytest.mark.parametrize("priority", [-1, 10, 4.5, "9", True])
def test_it_refuses_a_priority_outside_0_to_9_and_stores_nothing(
    producer_api: Api, priority: Any
) -> None:
    items = [{"topic": "orders", "data": 1}, {"topic": "orders", "data": 2, "priority": priority}]
    expect_error(
        producer_api.post("/api/v1/messages", {"messages": items}),
        400,
        "invalid_request",
        "messages[1].priority",
    )
    assert Message.objects.count() == 0


def test_it_searches_by_priority_and_shows_it(producer_api: Api, shop_admin_api: Api) -> None:
    stored = produced(producer_api)
    response = shop_admin_api.get("/api/v1/messages", {"priority": "9"})
    assert response.status_code == 200
    found = response.json()["messages"]
    assert sorted(m["id"] for m in found) == sorted(
        m["id"] for m, p in zip(stored, PRIORITIES, strict=True) if p == 9
    )
    assert {m["priority"] for m in found} == {9}
    for bad in ("10", "\u00b2", " 9", "-1"):  # "²".isdigit() holds, int("²") raises
        expect_error(shop_admin_api.get("/api/v1/messages", {"priority": bad}), 400, "invalid_request", "priority")
    for bad in ("\u0663", "+1", "1_0"):  # int() reads these
        expect_error(shop_admin_api.get("/api/v1/messages", {"id": bad}), 400, "invalid_request", "id")
    beyond = shop_admin_api.get("/api/v1/messages", {"id": str(2**70), "priority": ""})
    assert (beyond.status_code, beyond.json()["messages"]) == (200, [])


def test_it_lists_and_filters_messages_by_priority_in_the_console(
    producer_api: Api, db: Any
) -> None:
    from django.contrib.auth.models import User

    stored = produced(producer_api)
    client = Client()
    client.force_login(
        User.objects.create_superuser("root", "root@example.org", "a-long-test-password-42")
    )
    page = client.get(reverse("console:messages"), {"priority": "7"})
    assert page.status_code == 200
    html = page.content.decode()
    seven = [m["id"] for m, p in zip(stored, PRIORITIES, strict=True) if p == 7]
    assert f'href="{reverse("console:message", args=[seven[0]])}"' in html
    assert f'href="{reverse("console:message", args=[stored[0]["id"]])}"' not in html
    assert '<th class="num">Priority</th>' in html
    detail = client.get(reverse("console:message", args=[seven[0]])).content.decode()
    assert '<dd id="message-priority">7</dd>' in detail
