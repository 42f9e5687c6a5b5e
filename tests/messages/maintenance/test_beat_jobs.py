"""The maintenance the design describes, run by the real thing: Celery beat and a worker with
the schedules setup_maintenance installs, and a broker process that leaves lease recovery to
beat (MQ_LEASE_RECOVERY_SECONDS=0). A consumer's lease ends; beat's `retry` job, the only
trigger, takes the message back and a waiting pull gets it; every scheduled job runs, and
/healthz/maintenance turns from 503 to 200."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.core.management import call_command

from messages.maintenance.models import MaintenanceRun
from messages.maintenance.schedule import SCHEDULES
from messages.models import Message, MessageTrace
from tests.support.maintenance import CeleryProcesses, celery_procs, wait_for  # noqa: F401 - the fixture
from tests.support.server import BrokerServer
from topics.models import Topic
from topics.services import token_create

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e, pytest.mark.timeout(240)]


def test_beat_recovers_leases_and_runs_every_scheduled_job(celery_procs: CeleryProcesses, tmp_path: Path) -> None:  # noqa: F811
    call_command("setup_maintenance", verbosity=0)
    # Redis pub/sub channels ignore the database number: a topic of its own.
    topic = f"beat-{uuid.uuid4().hex[:8]}"
    Topic.objects.create(name=topic, timeout_seconds=1, retry_strategy="fixed", retry_interval_seconds=0)
    token, _ = token_create(actor="test", scopes=["admin"], name="t")
    server = BrokerServer(
        "beat_jobs", database_url=celery_procs.env["DATABASE_URL"],
        extra_env={"REDIS_URL": celery_procs.redis_url, "MQ_VAR_DIR": str(tmp_path / "broker"),
                   "MQ_LEASE_RECOVERY_SECONDS": "0", "MQ_LEASE_GRACE_SECONDS": "0",
                   "MQ_FALLBACK_POLL_SECONDS": "25"},
    )
    try:
        url = server.start()
        with server.client(url, token) as client:
            assert client.get("/healthz/maintenance").status_code in (200, 503)
            [stored] = client.post("/api/v1/messages", json={"messages": [{"topic": topic, "data": 1}]}).json()["messages"]
            held = client.post("/api/v1/pull", json={"topic": topic, "consumer": "gone", "max_messages": 1,
                                                     "wait_seconds": 0}).json()["messages"]
            assert [m["id"] for m in held] == [stored["id"]]
        # Without beat nothing takes the lease back: the brokers do not.
        got: dict[str, Any] = {}

        def pull() -> None:
            with server.client(url, token) as waiting:
                got["body"] = waiting.post("/api/v1/pull", json={
                    "topic": topic, "consumer": "next", "max_messages": 1, "wait_seconds": 25}).json()

        puller = threading.Thread(target=pull)
        puller.start()
        celery_procs.worker("w1")
        celery_procs.beat()
        puller.join(timeout=40)

        assert [m["id"] for m in got["body"]["messages"]] == [stored["id"]]
        assert got["body"]["messages"][0]["attempt"] == 2
        expired = MessageTrace.objects.get(message_id=stored["id"], event="lease_expired")
        assert expired.actor == "broker"
        assert Message.objects.get(id=stored["id"]).lease_owner == "next"

        jobs = {s.job for s in SCHEDULES} - {"reports"}  # daily: not due yet, and not late
        wait_for(lambda: set(MaintenanceRun.objects.filter(outcome="ok", runs__gte=1).values_list("job", flat=True))
                 >= jobs, timeout=90, what=f"a good run of each of {sorted(jobs)}\n{celery_procs.output()}")
        assert MaintenanceRun.objects.get(job="retry").last_result.get("by") is None  # beat's, not the brokers'
        answer = httpx.get(f"{url}/healthz/maintenance", timeout=10)
        assert answer.status_code == 200, answer.text
        # Ours, and what beat schedules of its own (celery.backend_cleanup): all it runs.
        listed = {j["job"] for j in answer.json()["jobs"]}
        assert {s.job for s in SCHEDULES} <= listed and all(j.startswith("celery.") for j in listed - jobs - {"reports"})
    finally:
        server.stop()
