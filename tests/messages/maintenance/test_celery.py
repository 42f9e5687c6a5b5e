"""The jobs on real Celery workers (and beat) as subprocesses: Redis as the Celery broker,
this run's MariaDB test database, no eager mode."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest

from messages.alarms.models import Alarm
from messages.archive.models import MessageArchive
from messages.delivery.claims import messages_claim
from messages.maintenance.models import MaintenanceRun
from messages.models import Message, MessageTrace
from messages.stats.models import StatsBucket
from tests.support.maintenance import (
    BROKER,
    CeleryProcesses,
    age_messages,
    consume,
    produce,
    settle_trace,
    wait_for,
)
from tests.support.server import BrokerServer
from topics.models import Topic
from topics.services import token_create

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e, pytest.mark.timeout(280)]


def runs_of(job: str) -> int:
    run = MaintenanceRun.objects.filter(job=job).first()
    return run.runs if run is not None and run.outcome != "running" else 0


def wait_runs(procs: CeleryProcesses, job: str, runs: int, timeout: float = 90) -> MaintenanceRun:
    try:
        wait_for(lambda: runs_of(job) >= runs, timeout=timeout, what=f"{runs} run(s) of {job}")
    except AssertionError:
        raise AssertionError(f"{job} did not run; worker output:\n{procs.output()}") from None
    run = MaintenanceRun.objects.get(job=job)
    assert run.outcome == "ok", run.last_error
    return run


def total(field: str, topic: str) -> int:
    return sum(getattr(b, field) for b in StatsBucket.objects.filter(topic=topic))


def test_it_runs_each_job_on_a_worker_with_its_effect_on_real_rows(celery_procs: CeleryProcesses) -> None:
    Topic.objects.create(name="orders", retry_count=2, retention_days=7, backlog_alarm_threshold=5,
                         alarm_emails=["ops@example.com"])
    old = produce("orders", 4)
    consume("orders", 4)
    age_messages(old, days=10)  # finished 10 days ago: past the 7 days retention
    produce("orders", 10)
    messages_claim(principal=BROKER, topic="orders", group="default", consumer="busy", max_messages=1)
    settle_trace()
    celery_procs.worker("w1")

    celery_procs.send("messages.maintenance.flush")
    wait_runs(celery_procs, "flush", 1)
    for job in ("cleanup", "alarms"):
        celery_procs.send(f"messages.maintenance.{job}")
    for job in ("cleanup", "alarms"):
        wait_runs(celery_procs, job, 1)

    # flush: counted from the trace, snapshot from the claim index
    assert total("produced", "orders") == 14 and total("succeeded", "orders") == 4
    snapshot = StatsBucket.objects.filter(topic="orders", deliverable__isnull=False).latest("minute")
    assert (snapshot.deliverable, snapshot.running) == (9, 1)
    # cleanup: archived with their trace and exported to Parquet where the worker was told
    assert set(MessageArchive.objects.values_list("id", flat=True)) == set(old)
    assert not Message.objects.filter(id__in=old).exists()
    exported = ds.dataset(celery_procs.tmp / "archive" / "messages", format="parquet", partitioning="hive").to_table()
    assert sorted(exported.column("id").to_pylist()) == sorted(old)
    # alarms: the backlog of 9 crossed the threshold of 5; sent through the worker's mail backend
    alarm = Alarm.objects.get(topic="orders", kind="backlog")
    assert alarm.value == 9 and alarm.sent_at is not None
    assert MaintenanceRun.objects.get(job="cleanup").last_result["archived"] == 4


def test_it_counts_and_archives_each_message_once_when_two_workers_run_the_same_jobs(
    celery_procs: CeleryProcesses,
) -> None:
    Topic.objects.create(name="orders", retention_days=1)
    ids: list[int] = []
    for _ in range(3):
        ids += produce("orders", 1000)
    for _ in range(3):
        consume("orders", 1000)
    age_messages(ids, days=2)
    settle_trace()
    celery_procs.worker("w1")
    celery_procs.worker("w2")

    for _ in range(2):
        celery_procs.send("messages.maintenance.flush")
        celery_procs.send("messages.maintenance.cleanup")
    wait_runs(celery_procs, "flush", 2)
    wait_runs(celery_procs, "cleanup", 2)

    assert total("produced", "orders") == 3000 and total("succeeded", "orders") == 3000
    assert MessageArchive.objects.count() == 3000
    assert not Message.objects.filter(topic="orders").exists()
    archived_events = MessageTrace.objects.filter(message_id__in=ids, event="archived")
    assert archived_events.count() == 3000  # once per message, however the batches were split
    assert MaintenanceRun.objects.get(job="cleanup").runs == 2


def test_a_waiting_pull_gets_a_delayed_message_on_time_from_the_broker_alone(
    celery_procs: CeleryProcesses, tmp_path: Path
) -> None:
    """Without Celery (no `delay` job running), a produce of a delayed message wakes the
    waiting pull, which then waits until the message's effect_time (the fallback poll is 25 s)."""
    # Redis pub/sub channels ignore the database number: a topic name of its own keeps other
    # suites' wake-ups (for "orders"...) from waking this pull by chance.
    topic = f"maint-delay-{uuid.uuid4().hex[:8]}"
    Topic.objects.create(name=topic)
    token, _ = token_create(actor="test", scopes=[f"consume:{topic}", f"produce:{topic}"], name="t")
    server = BrokerServer(
        "maint_delay", database_url=celery_procs.env["DATABASE_URL"],
        extra_env={"REDIS_URL": celery_procs.redis_url, "MQ_FALLBACK_POLL_SECONDS": "25",
                   "MQ_VAR_DIR": str(tmp_path / "broker")},
    )
    try:
        url = server.start()
        got: dict[str, Any] = {}

        def pull() -> None:
            with server.client(url, token) as client:
                response = client.post("/api/v1/pull", json={
                    "topic": topic, "consumer": "c1", "max_messages": 1, "wait_seconds": 25})
                got["at"] = time.time()
                got["body"] = response.json()

        puller = threading.Thread(target=pull)
        puller.start()
        # Before or after the pull starts waiting, either way it must come on time.
        with server.client(url, token) as client:
            [stored] = client.post("/api/v1/messages", json={
                "messages": [{"topic": topic, "data": {}, "delay_seconds": 3}]}).json()["messages"]
        effect_time = Message.objects.get(id=stored["id"]).effect_time.timestamp()
        puller.join(timeout=40)

        assert [m["id"] for m in got["body"]["messages"]] == [stored["id"]]
        late = got["at"] - effect_time
        assert -0.05 < late < 2.0, f"delivered {late:.2f}s after effect_time"
    finally:
        server.stop()
