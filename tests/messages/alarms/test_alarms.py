"""The alarms job: e-mails to the topic's alarm addresses, once per period and kind."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.core import mail
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from messages.alarms.models import Alarm
from messages.alarms.services import alarms_check
from messages.stats.flush import stats_flush
from messages.stats.models import StatsBucket
from tests.support.maintenance import consume, produce, settle_trace
from topics.models import Topic


def orders_topic(**fields: object) -> Topic:
    return Topic.objects.create(name="orders", alarm_emails=["ops@example.com", "dev@example.com"], **fields)


@pytest.mark.django_db
def test_it_emails_the_topic_addresses_when_the_backlog_crosses_its_threshold() -> None:
    orders_topic(backlog_alarm_threshold=5)
    produce("orders", 8)
    stats_flush()

    result = alarms_check()

    assert result["emailed"] == 1
    assert len(mail.outbox) == 1
    email = mail.outbox[0]
    assert sorted(email.to) == ["dev@example.com", "ops@example.com"]
    assert "orders" in email.subject and "8 deliverable messages" in email.body
    alarm = Alarm.objects.get()
    assert (alarm.kind, alarm.value, alarm.threshold) == ("backlog", 8.0, 5.0) and alarm.sent_at is not None


@pytest.mark.django_db
def test_it_stays_quiet_below_the_threshold() -> None:
    orders_topic(backlog_alarm_threshold=50)
    produce("orders", 8)
    stats_flush()

    assert alarms_check()["raised"] == 0
    assert mail.outbox == []


@pytest.mark.django_db
def test_it_sends_one_email_per_period_for_a_lasting_condition() -> None:
    orders_topic(backlog_alarm_threshold=1)
    produce("orders", 3)
    stats_flush()

    alarms_check()
    produce("orders", 3)
    stats_flush()
    alarms_check()
    alarms_check()

    assert len(mail.outbox) == 1
    assert Alarm.objects.count() == 1


@pytest.mark.django_db
def test_it_alarms_again_in_the_next_period() -> None:
    orders_topic(backlog_alarm_threshold=1)
    produce("orders", 3)
    stats_flush()
    alarms_check()

    later = timezone.now() + timedelta(minutes=61)
    StatsBucket.objects.update(minute=later.replace(second=0, microsecond=0))
    with override_settings(MQ_ALARM_PERIOD_MINUTES=60):
        alarms_check(now=later)

    assert len(mail.outbox) == 2


@pytest.mark.django_db
def test_it_alarms_on_new_dead_letters_and_on_an_old_backlog() -> None:
    orders_topic(retry_count=0)
    produce("orders", 3)
    consume("orders", 1, status="FAIL", retry=False)
    settle_trace()
    stats_flush()
    StatsBucket.objects.filter(deliverable__isnull=False).update(oldest_deliverable_age_seconds=3600)

    with override_settings(MQ_ALARM_OLDEST_AGE_SECONDS=600):
        alarms_check()

    assert sorted(Alarm.objects.values_list("kind", flat=True)) == ["dead_letters", "oldest_age"]
    assert len(mail.outbox) == 2
    assert any("dead letters" in m.body for m in mail.outbox)


@pytest.mark.django_db
def test_it_records_alarms_of_topics_without_addresses_without_emailing() -> None:
    Topic.objects.create(name="orders", backlog_alarm_threshold=1)
    produce("orders", 3)
    stats_flush()

    assert alarms_check() == {"checked_topics": 1, "raised": 1, "emailed": 0, "webhooks_queued": 0}
    assert mail.outbox == []
    assert Alarm.objects.get().recipients == []


@pytest.mark.django_db(transaction=True)
def test_it_sends_no_duplicate_when_two_workers_check_at_once() -> None:
    orders_topic(backlog_alarm_threshold=1)
    produce("orders", 3)
    stats_flush()
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            barrier.wait(timeout=10)
            alarms_check()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)

    assert errors == []
    assert len(mail.outbox) == 1
    assert Alarm.objects.count() == 1


@pytest.mark.django_db
def test_it_lists_recent_alarms_only_for_visible_topics() -> None:
    from messages.alarms.selectors import alarms_recent
    from mqcenter.core.auth import Principal
    from topics.models import Biz

    shop, other = Biz.objects.create(name="shop"), Biz.objects.create(name="other")
    Topic.objects.create(name="orders", biz=shop, backlog_alarm_threshold=1)
    Topic.objects.create(name="secret", biz=other, backlog_alarm_threshold=1)
    produce("orders", 2)
    produce("secret", 2)
    stats_flush()
    alarms_check()

    shop_admin = Principal(name="a", scopes=("admin",), biz_ids=frozenset({shop.id}))
    assert [a.topic for a in alarms_recent(principal=shop_admin)] == ["orders"]
