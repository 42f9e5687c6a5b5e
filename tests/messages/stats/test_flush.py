"""The flush job: per-minute counts from the trace, backlog snapshots, the stats reads."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from messages.maintenance.models import MaintenanceRun
from messages.models import MessageTrace
from messages.stats.flush import stats_flush
from messages.stats.models import StatsBucket
from messages.stats.selectors import stats_series, topic_stats
from mqcenter.core.auth import Principal
from tests.support.maintenance import BROKER, consume, minute_ago, produce, settle_trace
from topics.models import Biz, Topic

pytestmark = pytest.mark.django_db


def totals(topic: str) -> dict[str, int]:
    fields = ("produced", "succeeded", "failed", "retried", "lease_expired")
    rows = StatsBucket.objects.filter(topic=topic)
    return {f: sum(getattr(r, f) for r in rows) for f in fields}


def test_it_counts_produced_succeeded_failed_and_retried_events_per_minute() -> None:
    Topic.objects.create(name="orders", retry_count=1, retry_interval_seconds=60)
    produce("orders", 10)
    consume("orders", 4)  # 4 succeed
    consume("orders", 3, status="FAIL")  # 3 fail with a retry left: retried, not dead
    consume("orders", 2, status="FAIL", retry=False)  # 2 dead letters
    settle_trace()

    result = stats_flush()

    assert result["events"] > 0
    assert totals("orders") == {"produced": 10, "succeeded": 4, "failed": 2, "retried": 3, "lease_expired": 0}


def test_it_counts_expired_messages_apart_from_failed_ones() -> None:
    from messages.delivery.expiry import messages_expire
    from messages.models import Message

    Topic.objects.create(name="orders")
    ids = produce("orders", 3)
    Message.objects.filter(id__in=ids[:2]).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert messages_expire()["expired"] == 2
    settle_trace()

    stats_flush()

    rows = StatsBucket.objects.filter(topic="orders")
    assert sum(r.expired for r in rows) == 2 and sum(r.failed for r in rows) == 0


def test_it_never_counts_an_event_twice_when_flushed_again() -> None:
    produce("orders", 5)
    settle_trace()
    stats_flush()
    stats_flush()
    produce("orders", 2)
    settle_trace()
    stats_flush()

    assert totals("orders")["produced"] == 7


def test_it_counts_produced_from_the_message_rows() -> None:
    new = produce("orders", 3)
    settle_trace()

    stats_flush()

    assert totals("orders")["produced"] == 3
    run = MaintenanceRun.objects.get(job="flush")
    assert run.message_cursor == max(new)
    assert not MessageTrace.objects.filter(message_id__in=new).exists()


def test_it_leaves_events_younger_than_the_settle_time_for_the_next_flush() -> None:
    produce("orders", 3)  # just now: not settled yet

    stats_flush()
    assert totals("orders")["produced"] == 0
    settle_trace()
    stats_flush()
    assert totals("orders")["produced"] == 3


def test_it_snapshots_the_backlog_per_topic_and_group() -> None:
    produce("orders", 5)
    produce("orders", 2, delay=3600)
    produce("orders", 4, group="audit")
    consume("orders", 1, status="FAIL", retry=False)
    claimed = consume  # noqa: F841 - readability
    from messages.delivery.claims import messages_claim

    messages_claim(principal=BROKER, topic="orders", group="audit", consumer="c2", max_messages=1)

    stats_flush()

    now_bucket = {b.group_name: b for b in StatsBucket.objects.filter(topic="orders", deliverable__isnull=False)}
    assert (now_bucket["default"].deliverable, now_bucket["default"].delayed, now_bucket["default"].dead) == (4, 2, 1)
    assert (now_bucket["audit"].deliverable, now_bucket["audit"].running) == (3, 1)
    assert now_bucket["default"].oldest_deliverable_age_seconds is not None


def test_it_records_the_watermark_and_last_run() -> None:
    produce("orders", 2)
    settle_trace()
    from messages.maintenance.runs import maintenance_run

    maintenance_run(job="flush", work=stats_flush)

    run = MaintenanceRun.objects.get(job="flush")
    assert run.outcome == "ok" and run.runs == 1 and run.last_finished_at is not None
    assert run.message_cursor > 0 and run.last_result["events"] >= 2  # "produced" is counted off the rows


def test_it_records_a_failed_run_with_its_error() -> None:
    from messages.maintenance.runs import maintenance_run

    def broken() -> dict[str, int]:
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        maintenance_run(job="cleanup", work=broken)

    run = MaintenanceRun.objects.get(job="cleanup")
    assert run.outcome == "error" and "disk on fire" in run.last_error


def test_it_serves_a_per_minute_series_with_gaps_filled() -> None:
    produce("orders", 6)
    settle_trace()
    stats_flush()

    series = stats_series(principal=BROKER, topic="orders", since=minute_ago(3), until=minute_ago(-1))

    assert len(series) == 4
    assert [p["minute"] for p in series] == [minute_ago(m) for m in (3, 2, 1, 0)]
    assert sum(p["produced"] for p in series) == 6
    assert series[0]["produced"] == 0 and series[0]["deliverable"] is None
    assert series[-1]["deliverable"] == 6


def test_it_hides_other_business_lines_from_the_series() -> None:
    shop = Biz.objects.create(name="shop")
    other = Biz.objects.create(name="other")
    Topic.objects.create(name="orders", biz=shop)
    Topic.objects.create(name="secret", biz=other)
    produce("orders", 2)
    produce("secret", 5)
    settle_trace()
    stats_flush()
    shop_admin = Principal(name="shop-admin", scopes=("admin",), biz_ids=frozenset({shop.id}))

    series = stats_series(principal=shop_admin, since=minute_ago(2), until=minute_ago(-1))

    assert sum(p["produced"] for p in series) == 2
    # Another line's topic has the series of a topic that does not exist.
    hidden = stats_series(principal=shop_admin, topic="secret", since=minute_ago(2), until=minute_ago(-1))
    assert hidden == stats_series(principal=shop_admin, topic="nosuch", since=minute_ago(2), until=minute_ago(-1))
    assert sum(p["produced"] for p in hidden) == 0


def test_it_adds_per_minute_rates_to_topic_stats() -> None:
    produce("orders", 10)
    past = minute_ago(2)
    StatsBucket.objects.create(topic="orders", group_name="default", minute=past, produced=50, succeeded=25)

    stats = topic_stats(principal=BROKER, topic="orders")

    assert stats[0]["counts"]["NEW"] == 10  # the existing output is unchanged
    assert stats[0]["rates"]["produced_per_minute"] == 10.0
    assert stats[0]["rates"]["succeeded_per_minute"] == 5.0


def test_it_purges_buckets_past_the_stats_retention() -> None:
    StatsBucket.objects.create(topic="orders", group_name="default", minute=timezone.now() - timedelta(days=400))

    stats_flush()

    assert not StatsBucket.objects.filter(minute__lt=timezone.now() - timedelta(days=300)).exists()


def test_it_shows_each_jobs_health_for_the_console() -> None:
    from django.core.management import call_command

    from messages.maintenance.runs import maintenance_run
    from messages.maintenance.selectors import maintenance_health

    call_command("setup_maintenance", verbosity=0)
    maintenance_run(job="flush", work=stats_flush)

    health = {row["job"]: row for row in maintenance_health()}
    assert list(health)[:6] == ["flush", "retry", "delay", "expire", "cleanup", "alarms"]
    assert health["flush"]["outcome"] == "ok" and health["flush"]["runs"] == 1
    assert health["flush"]["last_duration_ms"] is not None
    assert health["cleanup"]["outcome"] is None and health["cleanup"]["runs"] == 0
