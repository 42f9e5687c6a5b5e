"""Recurring messages: the API, validation, and one message per tick with concurrent runners."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection

from messages.models import Message
from messages.schedules.models import Schedule
from messages.schedules.services import schedule_next_tick, schedules_tick
from tests.conftest import Api
from tests.support.api import expect_error

EVERY_MINUTE = {"name": "ping", "topic": "orders.ping", "data": {"ping": 1}, "cron": "* * * * *", "timezone": "UTC"}


def create(api: Api, **fields: Any) -> dict[str, Any]:
    response = api.post("/api/v1/schedules", {**EVERY_MINUTE, **fields})
    assert response.status_code == 201, response.content
    return response.json()


def test_it_plans_the_next_tick_in_the_schedules_time_zone(shop_admin_api: Api) -> None:
    schedule = create(shop_admin_api, name="nightly", cron="0 2 * * *", timezone="Asia/Shanghai")
    next_run = datetime.fromisoformat(schedule["next_run_at"])
    assert next_run.astimezone(UTC).hour == 18 and next_run.minute == 0  # 02:00 at UTC+8
    assert shop_admin_api.get("/api/v1/schedules").json()["schedules"][0]["name"] == "nightly"


@pytest.mark.parametrize(
    ("fields", "field"),
    [({"cron": "61 * * * *"}, "cron"), ({"cron": "* * * * * *"}, "cron"), ({"cron": 5}, "cron"),
     ({"timezone": "Mars/Olympus"}, "timezone"), ({"topic": "bad topic"}, "topic"), ({"group": 3}, "group"),
     ({"enabled": "yes"}, "enabled"), ({"colour": "red"}, "colour")],
)
def test_it_refuses_bad_fields_and_stores_nothing(shop_admin_api: Api, fields: dict[str, Any], field: str) -> None:
    expect_error(shop_admin_api.post("/api/v1/schedules", {**EVERY_MINUTE, **fields}), 400, "invalid_request", field)
    assert not Schedule.objects.exists()


def test_it_edits_disables_runs_now_and_deletes(shop_admin_api: Api, producer_api: Api) -> None:
    schedule = create(shop_admin_api)
    url = f"/api/v1/schedules/{schedule['id']}"
    expect_error(producer_api.get(url), 403, "forbidden")
    response = shop_admin_api.patch(url, {"enabled": False})
    assert response.status_code == 200 and response.json()["next_run_at"] is None
    expect_error(shop_admin_api.patch(url, {"timezone": "Nowhere/Else"}), 400, "invalid_request", "timezone")

    response = shop_admin_api.post(f"{url}/run", {})
    assert response.status_code == 201, response.content
    message = Message.objects.get(id=response.json()["message"]["id"])
    assert message.topic == "orders.ping" and message.headers["mq-schedule"] == "ping"
    assert shop_admin_api.get(url).json()["last_message_id"] == message.id

    assert shop_admin_api.delete(url).status_code == 204
    expect_error(shop_admin_api.get(url), 404, "not_found")


def test_it_produces_exactly_one_message_per_tick_with_two_runners_over_three_minutes(
    shop_admin_api: Api, transactional_db: Any
) -> None:
    """Two runners call the tick for every second of three minutes, at the same injected
    time, on their own database connections: three ticks, three messages."""
    created = create(shop_admin_api)
    start = datetime.fromisoformat(created["next_run_at"])
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def runner() -> None:
        try:
            for second in range(0, 180, 1):
                barrier.wait(timeout=30)
                schedules_tick(now=start + timedelta(seconds=second))
        except BaseException as exc:  # noqa: BLE001 - surfaced by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=runner) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, errors
    ticks = sorted(Message.objects.filter(topic="orders.ping").values_list("headers", flat=True),
                   key=lambda h: h["mq-schedule-tick"])
    assert [h["mq-schedule-tick"] for h in ticks] == [
        (start + timedelta(minutes=n)).astimezone(UTC).isoformat() for n in range(3)
    ]
    schedule = Schedule.objects.get(id=created["id"])
    assert schedule.next_run_at == start + timedelta(minutes=3)


def test_ticks_missed_while_no_beat_ran_collapse_into_one(shop_admin_api: Api) -> None:
    created = create(shop_admin_api)
    start = datetime.fromisoformat(created["next_run_at"])
    assert schedules_tick(now=start + timedelta(minutes=30))["produced"] == 1
    assert schedules_tick(now=start + timedelta(minutes=30))["due"] == 0
    assert Schedule.objects.get(id=created["id"]).next_run_at == start + timedelta(minutes=31)


def test_the_next_tick_follows_daylight_saving_time() -> None:
    # Berlin leaves summer time on 2026-10-25: 02:00 local is 00:00 UTC before, 01:00 UTC after.
    before = schedule_next_tick(cron="0 2 * * *", zone="Europe/Berlin", after=datetime(2026, 10, 24, 12, tzinfo=UTC))
    after = schedule_next_tick(cron="0 2 * * *", zone="Europe/Berlin", after=datetime(2026, 10, 26, 12, tzinfo=UTC))
    assert (before.hour, after.hour) == (0, 1)
