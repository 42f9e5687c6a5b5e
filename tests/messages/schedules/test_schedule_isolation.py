"""Schedules between business lines: a tick is fair across lines and keeps up with 10,000
schedules; hostile cron and headers answer 400 naming the field on every door; names are per
line, so a 409 tells nothing of another line's."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from messages.models import Message
from messages.schedules.models import Schedule
from messages.schedules.services import schedules_tick
from tests.conftest import Api, make_api
from tests.support.api import expect_error
from tests.support.console import client_for, make_user
from topics.models import Biz, Topic

pytestmark = pytest.mark.django_db
EVERY_MINUTE = {"name": "ping", "topic": "orders.ping", "data": {"ping": 1}, "cron": "* * * * *", "timezone": "UTC"}


def many(biz: Biz, topic: str, count: int, due: Any, prefix: str) -> None:
    Topic.objects.get_or_create(name=topic, defaults={"biz": biz})
    Schedule.objects.bulk_create([
        Schedule(name=f"{prefix}{n}", biz=biz, topic=topic, group_name="g", cron="* * * * *", data="1", next_run_at=due)
        for n in range(count)
    ], batch_size=1000)


def test_a_tick_serves_every_line_before_a_lines_thousands(shop: Biz, other_biz: Biz, monkeypatch: Any) -> None:
    from messages.schedules import services

    monkeypatch.setattr(services, "TICK_LIMIT", 200)
    now = timezone.now()
    many(shop, "orders.flood", 1500, now - timedelta(minutes=5), "flood-")  # due long before theirs
    many(other_biz, "books.nightly", 1, now - timedelta(seconds=1), "nightly-")
    counts = schedules_tick(now=now)
    assert counts["produced"] == 200
    assert Message.objects.filter(topic="books.nightly").count() == 1  # in the first tick, not the 8th
    assert counts["lag_seconds"] >= 290  # shop's flood still waits: the maintenance page shows it


@pytest.mark.timeout(600)
def test_a_tick_keeps_up_with_10000_schedules_due_every_minute(shop: Biz, other_biz: Biz) -> None:
    if connection.vendor != "mysql":
        pytest.skip("measured on MariaDB")
    now = timezone.now().replace(second=0, microsecond=0)
    many(shop, "orders.minute", 8000, now, "m-")
    many(other_biz, "books.minute", 2000, now, "b-")
    started = time.monotonic()
    counts = schedules_tick(now=now + timedelta(seconds=1))
    took = time.monotonic() - started
    print(f"tick of 10,000 due schedules: {took:.1f} s ({counts})")
    assert counts["produced"] == 10_000 and counts["lag_seconds"] < 60
    assert Message.objects.count() == 10_000
    assert not Schedule.objects.filter(next_run_at__lte=now + timedelta(seconds=1)).exists()
    # A minute's ticks within the minute, with room for the other maintenance jobs.
    assert took < 45, took


@pytest.mark.parametrize(
    ("fields", "field"),
    [({"cron": "0 0 30 2 *"}, "cron"), ({"cron": "0 0 31 4 *"}, "cron"),
     ({"headers": {f"h{n}": "v" for n in range(12_000)}}, "headers"),
     ({"headers": {"big": "x" * 100_000}}, "headers.big"),
     ({"headers": {"line": "a\nb"}}, "headers.line")],
)
def test_hostile_cron_and_headers_answer_400_naming_the_field(shop_admin_api: Api, fields: dict[str, Any],
                                                              field: str) -> None:
    expect_error(shop_admin_api.post("/api/v1/schedules", {**EVERY_MINUTE, **fields}), 400, "invalid_request", field)
    created = shop_admin_api.post("/api/v1/schedules", EVERY_MINUTE).json()
    expect_error(shop_admin_api.patch(f"/api/v1/schedules/{created['id']}", fields), 400, "invalid_request", field)
    assert Schedule.objects.get().cron == "* * * * *" and Schedule.objects.get().headers == {}


def test_a_cron_that_never_fires_answers_400_in_the_console_form(shop: Biz) -> None:
    Topic.objects.create(name="orders", biz=shop)
    admin = client_for(make_user("cron-admin", superuser=True))
    response = admin.post("/schedules/", {"name": "feb30", "topic": "orders", "cron": "0 0 30 2 *",
                                          "timezone": "UTC", "data": "1"})
    assert response.status_code == 400 and "never fires" in response.content.decode()
    assert not Schedule.objects.exists()


def test_schedule_names_are_per_business_line(shop: Biz, other_biz: Biz, shop_admin_api: Api) -> None:
    theirs = make_api(["admin"], other_biz)
    assert theirs.post("/api/v1/schedules", {**EVERY_MINUTE, "name": "nightly", "topic": "books"}).status_code == 201
    # Another line's name is free here: nothing tells this line it is taken there.
    mine = shop_admin_api.post("/api/v1/schedules", {**EVERY_MINUTE, "name": "nightly"})
    assert mine.status_code == 201, mine.content
    expect_error(shop_admin_api.post("/api/v1/schedules", {**EVERY_MINUTE, "name": "nightly"}), 409, "conflict", "name")
    other = shop_admin_api.post("/api/v1/schedules", {**EVERY_MINUTE, "name": "daily"}).json()
    expect_error(shop_admin_api.patch(f"/api/v1/schedules/{other['id']}", {"name": "nightly"}), 409, "conflict", "name")


def test_the_maintenance_page_shows_the_ticks_lag(shop: Biz) -> None:
    from messages.maintenance.runs import maintenance_run

    call_command("setup_maintenance", verbosity=0)
    many(shop, "orders.late", 3, timezone.now() - timedelta(minutes=10), "late-")
    with pytest.MonkeyPatch.context() as patch:
        from messages.schedules import services

        patch.setattr(services, "TICK_LIMIT", 1)  # two of the three still wait after the tick
        maintenance_run(job="schedules", work=schedules_tick)
    page = client_for(make_user("lag-viewer", superuser=True)).get("/maintenance/").content.decode()
    assert "tick lag" in page and 'class="schedule-lag badge s-FAIL"' in page
