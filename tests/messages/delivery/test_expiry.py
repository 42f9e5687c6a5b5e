"""Expiry: a message not delivered before `expires_at` / `ttl_seconds` becomes an EXPIRED dead
letter, by the claim that meets it or by the maintenance sweep; it is never delivered."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from messages.delivery.expiry import messages_expire
from messages.delivery.tasks import expire_task
from messages.maintenance.models import MaintenanceRun
from messages.models import Message, MessageTrace, Status
from messages.operations.dead_letters import dead_letter_groups
from mqcenter.core.auth import Principal
from tests.conftest import Api
from tests.messages.delivery.test_consume import make_topic
from tests.support.api import expect_error, parse_time, produce, pull

pytestmark = pytest.mark.django_db


def age(ids: list[int], seconds: float = 1) -> None:
    """Time passes for these messages: their expiry is `seconds` ago."""
    Message.objects.filter(id__in=ids).update(
        expires_at=timezone.now() - timedelta(seconds=seconds)
    )


def expired_trace(message_id: int) -> MessageTrace:
    return MessageTrace.objects.filter(message_id=message_id).order_by("-id").first()  # type: ignore[return-value]


def test_it_stores_the_expiry_from_ttl_seconds_or_expires_at(
    producer_api: Api, shop_admin_api: Api
) -> None:
    at = timezone.now() + timedelta(hours=2)
    before = timezone.now()
    by_ttl, by_time, plain = produce(
        producer_api,
        {"topic": "orders", "data": 1, "ttl_seconds": 60},
        {"topic": "orders", "data": 2, "expires_at": at.isoformat()},
        {"topic": "orders", "data": 3},
    )
    rows = {m.id: m for m in Message.objects.all()}
    assert (
        before + timedelta(seconds=60)
        <= rows[by_ttl["id"]].expires_at
        <= timezone.now() + timedelta(seconds=60)
    )
    assert rows[by_time["id"]].expires_at == at
    assert rows[plain["id"]].expires_at is None
    shown = shop_admin_api.get(f"/api/v1/messages/{by_time['id']}").json()
    assert parse_time(shown["expires_at"]) == at


def test_the_claim_never_delivers_an_expired_message_and_makes_it_expired(
    producer_api: Api, consumer_api: Api
) -> None:
    stored = produce(
        producer_api, *({"topic": "orders", "data": n, "ttl_seconds": 300} for n in range(3))
    )
    age([stored[1]["id"]])
    delivered = pull(consumer_api, "orders", max_messages=10)
    assert [m["id"] for m in delivered] == [stored[0]["id"], stored[2]["id"]]
    expired = Message.objects.get(id=stored[1]["id"])
    assert expired.status == Status.EXPIRED and expired.attempt == 0
    event = expired_trace(expired.id)
    assert (event.event, event.status_after) == ("dead", Status.EXPIRED)
    assert event.log.startswith("expired: not delivered before ")


@pytest.mark.parametrize("mode", ["serial", "sharded"])
def test_serial_and_sharded_claims_skip_an_expired_head(
    mode: str, admin_api: Api, producer_api: Api, consumer_api: Api
) -> None:
    make_topic(admin_api, groups=[{"group": "g", "mode": mode}])
    head, second = produce(
        producer_api,
        *(
            {"topic": "orders", "group": "g", "key": "k", "data": n, "ttl_seconds": 300}
            for n in range(2)
        ),
    )
    age([head["id"]])
    assert [m["id"] for m in pull(consumer_api, "orders", group="g", max_messages=5)] == [
        second["id"]
    ]
    assert Message.objects.get(id=head["id"]).status == Status.EXPIRED


def test_the_sweep_expires_messages_nobody_pulls_in_bounded_batches(
    producer_api: Api, consumer_api: Api
) -> None:
    stored = produce(
        producer_api, *({"topic": "orders", "data": n, "ttl_seconds": 300} for n in range(7))
    )
    produce(producer_api, {"topic": "orders", "data": "no expiry"})
    age([m["id"] for m in stored[:5]])
    assert messages_expire(batch=2, max_batches=2) == {"expired": 4}
    assert messages_expire(batch=2) == {"expired": 1}
    assert messages_expire() == {"expired": 0}
    statuses = dict(Message.objects.values_list("id", "status"))
    assert [statuses[m["id"]] for m in stored] == [Status.EXPIRED] * 5 + [Status.NEW] * 2
    assert all(expired_trace(m["id"]).actor == "maintenance" for m in stored[:5])
    assert len(pull(consumer_api, "orders", max_messages=10)) == 3


def test_the_beat_task_records_its_run_for_the_maintenance_page(producer_api: Api) -> None:
    stored = produce(producer_api, {"topic": "orders", "data": 1, "ttl_seconds": 300})
    age([stored[0]["id"]])
    assert expire_task.apply().get() == {"expired": 1}
    run = MaintenanceRun.objects.get(job="expire")
    assert run.outcome == "ok" and run.last_result == {"expired": 1}


def test_a_message_leased_before_its_expiry_is_not_expired(
    producer_api: Api, consumer_api: Api
) -> None:
    stored = produce(producer_api, {"topic": "orders", "data": 1, "ttl_seconds": 300})
    assert len(pull(consumer_api, "orders")) == 1
    age([stored[0]["id"]])
    assert messages_expire() == {"expired": 0}
    assert Message.objects.get(id=stored[0]["id"]).status == Status.RUNNING


def test_expired_messages_are_dead_letters_and_redrive_drops_the_expiry(
    producer_api: Api, consumer_api: Api, shop_admin_api: Api
) -> None:
    stored = produce(producer_api, {"topic": "orders", "data": 1, "ttl_seconds": 300})
    age([stored[0]["id"]])
    messages_expire()
    groups, _ = dead_letter_groups(
        principal=Principal(name="test", scopes=("admin",), biz_ids=None)
    )
    assert [(g["topic"], g["statuses"], g["count"]) for g in groups] == [
        ("orders", [Status.EXPIRED], 1)
    ]
    assert groups[0]["reason"].startswith("expired")
    response = shop_admin_api.post("/api/v1/messages/redrive", {"ids": [stored[0]["id"]]})
    assert response.status_code == 200, response.content
    message = Message.objects.get(id=stored[0]["id"])
    assert (message.status, message.expires_at) == (Status.NEW, None)
    assert [m["id"] for m in pull(consumer_api, "orders")] == [stored[0]["id"]]


def test_the_console_shows_expired_messages_on_the_detail_and_dead_letter_pages(
    producer_api: Api,
) -> None:
    stored = produce(producer_api, {"topic": "orders", "data": 1, "ttl_seconds": 300})
    age([stored[0]["id"]])
    messages_expire()
    client = Client()
    client.force_login(
        User.objects.create_superuser("root", "root@example.org", "a-long-test-password-42")
    )
    detail = client.get(reverse("console:message", args=[stored[0]["id"]])).content.decode()
    assert ">EXPIRED<" in detail and "expired undelivered" in detail
    assert "expired: not delivered before" in detail  # the trace's reason
    dead = client.get(reverse("console:dead_letters")).content.decode()
    assert "expired: not delivered before its expires_at" in dead


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"ttl_seconds": 0}, "messages[1].ttl_seconds"),
        ({"ttl_seconds": -5}, "messages[1].ttl_seconds"),
        ({"ttl_seconds": "60"}, "messages[1].ttl_seconds"),
        ({"ttl_seconds": 10, "delay_seconds": 30}, "messages[1].ttl_seconds"),
        ({"expires_at": "2001-01-01T00:00:00Z"}, "messages[1].expires_at"),
        ({"expires_at": "soon"}, "messages[1].expires_at"),
        ({"expires_at": "2099-01-01T00:00:00"}, "messages[1].expires_at"),
        ({"expires_at": "2099-01-01T00:00:00Z", "ttl_seconds": 5}, "messages[1].expires_at"),
        (
            {"expires_at": "2099-01-01T00:00:00Z", "effect_time": "2099-06-01T00:00:00Z"},
            "messages[1].expires_at",
        ),
    ],
)
def test_it_refuses_a_bad_expiry_and_stores_nothing(
    producer_api: Api, fields: dict[str, Any], field: str
) -> None:
    items = [{"topic": "orders", "data": 0}, {"topic": "orders", "data": 1, **fields}]
    expect_error(
        producer_api.post("/api/v1/messages", {"messages": items}), 400, "invalid_request", field
    )
    assert Message.objects.count() == 0


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"ttl_seconds": 0}, "messages[0].ttl_seconds: must be more than 0 seconds."),
        ({"expires_at": "2001-01-01T00:00:00Z"}, "messages[0].expires_at: must lie in the future."),
    ],
)
def test_a_refused_expiry_says_what_is_wrong_with_it(producer_api: Api, fields: dict[str, Any], message: str) -> None:
    answer = producer_api.post("/api/v1/messages", {"messages": [{"topic": "orders", "data": 0, **fields}]})
    assert expect_error(answer, 400, "invalid_request")["message"] == message
