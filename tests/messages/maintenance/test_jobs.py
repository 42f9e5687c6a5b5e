"""The `retry` and `delay` jobs doing their work, each the one trigger of it, and the
Maintenance page and `/healthz/maintenance` showing exactly the scheduled jobs."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
import redis
from django.conf import settings
from django.core.management import call_command
from django.test import override_settings
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from messages.delivery.claims import messages_claim
from messages.delivery.produce import ProduceItem, messages_produce
from messages.maintenance.models import MaintenanceRun
from messages.maintenance.schedule import SCHEDULES
from messages.maintenance.selectors import maintenance_health
from messages.maintenance.tasks import delay_task, retry_task
from messages.models import Message, MessageTrace, Status
from mqcenter.core.auth import Principal
from registry.wakeups import wakeup_hub
from topics.models import Topic, TopicGroup

pytestmark = pytest.mark.django_db

BROKER = Principal(name="test", scopes=("admin",), biz_ids=None)


def test_retry_takes_back_expired_leases_when_the_brokers_do_not() -> None:
    Topic.objects.create(name="jobs", retry_count=1, retry_strategy="fixed", retry_interval_seconds=7)
    [stored] = messages_produce(principal=BROKER, items=[ProduceItem(topic="jobs", data="1")])
    messages_claim(principal=BROKER, topic="jobs", group="default", consumer="c1", max_messages=1)
    Message.objects.filter(id=stored.id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))

    with override_settings(MQ_LEASE_RECOVERY_SECONDS=1.0):  # the brokers' job: the task leaves it
        assert retry_task() == {"recovered": 0, "by": "broker processes every 1 s"}
    assert Message.objects.get(id=stored.id).status == Status.RUNNING

    assert retry_task() == {"recovered": 1}
    message = Message.objects.get(id=stored.id)
    assert (message.status, message.retry_remaining) == (Status.NEW, 0)
    assert message.effect_time > timezone.now() + timedelta(seconds=5)  # due after the retry delay
    assert MessageTrace.objects.filter(message_id=stored.id, event="lease_expired").exists()
    run = MaintenanceRun.objects.get(job="retry")
    assert (run.outcome, run.runs, run.last_result) == ("ok", 2, {"recovered": 1})


def published_pairs(pubsub: Any, topic: str) -> list[tuple[str, str]]:
    """The pairs of `topic` the wake-up hub published to every broker process (Redis), up to
    the sentinel this sends after them."""
    sentinel = f"sentinel-{uuid.uuid4().hex}"
    redis.Redis.from_url(settings.REDIS_URL).publish(wakeup_hub().channel, json.dumps({"pairs": [[sentinel, ""]]}))
    found: list[tuple[str, str]] = []
    while True:
        message = pubsub.get_message(timeout=10)
        assert message is not None, "the sentinel never came"
        if message["type"] != "message":
            continue
        pairs = [tuple(p) for p in json.loads(message["data"])["pairs"]]
        if (sentinel, "") in pairs:
            return found
        found += [p for p in pairs if p[0] == topic]


def test_delay_wakes_the_pulls_of_groups_whose_messages_came_due_since_its_last_run() -> None:
    name = f"later-{uuid.uuid4().hex[:8]}"  # Redis channels are shared by every test run
    topic = Topic.objects.create(name=name)
    now = timezone.now()
    for group in ("due", "not-yet", "idle"):
        TopicGroup.objects.create(topic=topic, name=group, last_pull_at=now if group != "idle" else None)
    for group, seconds in (("due", -1), ("not-yet", 3600), ("idle", -1)):
        Message.objects.create(topic=name, group_name=group, data="1", effect_time=now + timedelta(seconds=seconds),
                               add_time=now, update_time=now)
    MaintenanceRun.objects.create(job="delay", cursor=int((now - timedelta(seconds=5)).timestamp() * 1e6))
    pubsub = redis.Redis.from_url(settings.REDIS_URL).pubsub()
    pubsub.subscribe(wakeup_hub().channel)
    try:
        result = delay_task()
        # "idle" was never pulled from: no pull of it can be waiting.
        assert published_pairs(pubsub, name) == [(name, "due")]
        assert result == {"groups": 2, "woken": 1}
        # The next run starts where this one ended: nothing came due since.
        assert delay_task()["woken"] == 0
        assert published_pairs(pubsub, name) == []
    finally:
        pubsub.close()


def test_the_page_and_the_health_check_list_exactly_the_scheduled_jobs(admin_api, client, django_user_model) -> None:
    assert maintenance_health() == []  # nothing scheduled: nothing to be late
    call_command("setup_maintenance", verbosity=0)
    PeriodicTask.objects.filter(task="reports.report_heap_daily").update(enabled=False)
    jobs = maintenance_health()
    assert [j["job"] for j in jobs] == [s.job for s in SCHEDULES if s.job != "reports"]
    assert {j["job"]: j["interval_seconds"] for j in jobs}["retry"] == 2
    assert all(j["lag_seconds"] < 60 and not j["stale"] for j in jobs)  # just scheduled

    # Ten minutes later only the jobs that ran are on time.
    later = timezone.now() + timedelta(minutes=10)
    retry_task()
    delay_task()
    MaintenanceRun.objects.filter(job__in=["retry", "delay"]).update(last_ok_at=later - timedelta(seconds=1))
    stale = {j["job"] for j in maintenance_health(now=later) if j["stale"]}
    assert stale == {s.job for s in SCHEDULES} - {"retry", "delay", "reports", "cleanup"}

    PeriodicTask.objects.update(start_time=timezone.now() - timedelta(minutes=10))
    answer = client.get("/healthz/maintenance")
    assert answer.status_code == 503
    assert "flush" in answer.json()["stale"] and "retry" not in answer.json()["stale"]

    admin = django_user_model.objects.create_superuser("boss", password="pw-123456789")
    client.force_login(admin)
    page = client.get("/maintenance/").content.decode()
    assert page.count("<tr class=") == len(jobs)
    assert 'data-job="retry"' in page and 'data-job="reports"' not in page


def test_the_health_check_answers_200_when_every_job_ran_on_time(client) -> None:
    call_command("setup_maintenance", verbosity=0)
    for scheduled in SCHEDULES:
        MaintenanceRun.objects.create(job=scheduled.job, outcome="ok", last_ok_at=timezone.now(), runs=1)
    answer = client.get("/healthz/maintenance")
    assert answer.status_code == 200, answer.content
    assert answer.json()["status"] == "ok" and len(answer.json()["jobs"]) == len(SCHEDULES)
    MaintenanceRun.objects.filter(job="delay").update(outcome="error", last_error="boom")
    assert client.get("/healthz/maintenance").json()["stale"] == ["delay"]
