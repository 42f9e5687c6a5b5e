"""Scheduled, retrying, in-flight, maintenance and alarm pages against the real database."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management import call_command
from django.utils import timezone

from messages.alarms.models import Alarm
from messages.maintenance.models import MaintenanceRun
from messages.models import Message, Status
from tests.support.console import add_message
from topics.models import Topic

XSS = "<script>window.__pwned=1</script>"


def test_it_lists_scheduled_messages_soonest_first(orders: Topic, clients: dict[str, Any]) -> None:
    later = add_message("orders", Status.NEW, key="sched-late")
    soon = add_message("orders", Status.NEW, key="sched-soon")
    due = add_message("orders", Status.NEW, key="due-now")
    now = timezone.now()
    Message.objects.filter(id=later.id).update(effect_time=now + timedelta(hours=2))
    Message.objects.filter(id=soon.id).update(effect_time=now + timedelta(minutes=5))
    body = clients["viewer"].get("/scheduled/").content.decode()
    assert body.index("sched-soon") < body.index("sched-late") and "due-now" not in body and due.id


def test_the_scheduled_page_leaves_out_a_topic_being_deleted(orders: Topic, clients: dict[str, Any]) -> None:
    for key, priority in (("sched-orders", 9), ("sched-other", 0)):
        message = add_message("orders", Status.NEW, key=key)
        Message.objects.filter(id=message.id).update(effect_time=timezone.now() + timedelta(hours=1),
                                                     priority=priority)
    Topic.all_objects.filter(name="orders").update(deleting_at=timezone.now())  # its purge has not ended
    response = clients["admin"].get("/scheduled/")
    assert response.status_code == 200 and "sched-orders" not in response.content.decode()


def test_it_lists_retrying_messages(orders: Topic, clients: dict[str, Any]) -> None:
    retry = add_message("orders", Status.NEW, key="second-try", log=f"downstream 503 {XSS}")
    Message.objects.filter(id=retry.id).update(attempt=1)
    add_message("orders", Status.NEW, key="first-try")
    body = clients["viewer"].get("/retrying/").content.decode()
    assert "second-try" in body and "first-try" not in body
    assert XSS not in body and "&lt;script&gt;" in body


def test_it_shows_what_each_consumer_holds_with_lease_age(orders: Topic, clients: dict[str, Any]) -> None:
    now = timezone.now()
    for owner, age in (("host-a:1:c", 30), ("host-a:1:c", 90), ("host-b:2:c", 5)):
        m = add_message("orders", Status.RUNNING)
        Message.objects.filter(id=m.id).update(lease_owner=owner, pulled_at=now - timedelta(seconds=age),
                                               lease_expires_at=now + timedelta(seconds=60))
    body = clients["viewer"].get("/in-flight/").content.decode()
    assert body.index("host-a:1:c") < body.index("host-b:2:c")  # the oldest lease first
    assert "2 messages, oldest lease 90 s" in body and "1 message, oldest lease 5 s" in body


def test_it_flags_stale_maintenance_jobs(db: Any, clients: dict[str, Any]) -> None:
    call_command("setup_maintenance", verbosity=0)
    now = timezone.now()
    MaintenanceRun.objects.create(job="flush", outcome="ok", runs=3, last_started_at=now, last_finished_at=now,
                                  last_ok_at=now, last_duration_ms=12)
    MaintenanceRun.objects.create(job="retry", outcome="ok", runs=1, last_started_at=now - timedelta(hours=1),
                                  last_ok_at=now - timedelta(hours=1), last_duration_ms=3)
    body = clients["viewer"].get("/maintenance/").content.decode()
    rows = {line.split("<td>")[1].split("</td>")[0]: line for line in body.split("<tr") if "<td>" in line}
    assert "stale" not in rows["flush"] and "12 ms" in rows["flush"]
    assert "stale" in rows["retry"]


def test_it_shows_alarm_history_of_visible_topics_only(orders: Topic, foreign_topic: Topic,
                                                       clients: dict[str, Any]) -> None:
    now = timezone.now()
    Alarm.objects.create(topic="orders", kind="backlog", period_start=now, value=120, threshold=100,
                         message=f"backlog 120 {XSS}", created_at=now, sent_at=now)
    Alarm.objects.create(topic=foreign_topic.name, kind="backlog", period_start=now, value=5, threshold=1,
                         message="secret alarm", created_at=now)
    body = clients["viewer"].get("/alarms/").content.decode()
    assert "backlog 120" in body and "secret alarm" not in body and XSS not in body
