"""Maintenance test helpers: produce/settle messages directly through the services, and
real Celery worker / beat subprocesses against this test run's MariaDB database and a
Redis database of their own (never eager mode)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from messages.delivery.acks import AckResult, messages_ack
from messages.delivery.claims import messages_claim
from messages.delivery.produce import ProduceItem, messages_produce
from messages.models import Message, MessageTrace
from mqcenter.core.auth import Principal
from tests.support.server import stop_processes

ROOT = Path(__file__).resolve().parents[2]
# The Celery broker of this suite's workers. Other suites may share the Redis database, so
# every test gets a queue of its own (and nothing here flushes a database).
CELERY_REDIS = os.environ.get("MQ_MAINT_TEST_REDIS", "redis://127.0.0.1:6379/13")
BROKER = Principal(name="test", scopes=("admin",), biz_ids=None)


def produce(topic: str, count: int, *, group: str = "default", delay: float = 0) -> list[int]:
    items = [
        ProduceItem(topic=topic, data=f'{{"n":{i}}}', group=group, delay_seconds=delay or None)
        for i in range(count)
    ]
    return [r.id for r in messages_produce(principal=BROKER, items=items)]


def consume(topic: str, count: int, *, status: str = "SUCCESS", group: str = "default", retry: bool = True) -> list[int]:
    """Claim up to `count` messages and ack them with `status`."""
    claimed, _ = messages_claim(principal=BROKER, topic=topic, group=group, consumer="c1", max_messages=count)
    messages_ack(
        principal=BROKER, consumer="c1",
        results=[AckResult(id=m.id, status=status, retry=retry) for m in claimed],
    )
    return [m.id for m in claimed]


def age_messages(ids: list[int], *, days: float) -> None:
    """Pretend these messages (and their trace) changed `days` ago."""
    past = timezone.now() - timedelta(days=days)
    Message.objects.filter(id__in=ids).update(update_time=past, add_time=past)
    MessageTrace.objects.filter(message_id__in=ids).update(at=past)


def settle_trace() -> None:
    """The flush counts trace rows (and message rows, for "produced" and the successes
    they hold) only once they are SETTLE_SECONDS old: age them all."""
    from messages.stats.flush import SETTLE_SECONDS

    settled = timezone.now() - timedelta(seconds=SETTLE_SECONDS + 1)
    MessageTrace.objects.filter(at__gt=settled).update(at=settled)
    Message.objects.filter(add_time__gt=settled).update(add_time=settled)
    Message.objects.filter(update_time__gt=settled).update(update_time=settled)
    Message.objects.filter(pulled_at__gt=settled).update(pulled_at=settled)  # never after the ack


def wait_for(predicate: Callable[[], Any], *, timeout: float = 60, interval: float = 0.2, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)


def minute_ago(minutes: int = 0) -> datetime:
    return timezone.now().replace(second=0, microsecond=0) - timedelta(minutes=minutes)


class CeleryProcesses:
    """Celery workers (and optionally beat) as subprocesses sharing the test database."""

    def __init__(self, tmp: Path, *, database_url: str, redis_url: str = CELERY_REDIS, extra_env: dict[str, str] | None = None) -> None:
        self.tmp = tmp
        self.queue = f"mq-maint-test-{uuid.uuid4().hex[:12]}"
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "mqcenter.settings",
            "DATABASE_URL": database_url,
            "REDIS_URL": redis_url,
            "CELERY_BROKER_URL": redis_url,
            "CELERY_TASK_DEFAULT_QUEUE": self.queue,
            "MQ_VAR_DIR": str(tmp / "var"),
            "MQ_ARCHIVE_PARQUET_DIR": str(tmp / "archive"),
            "MQ_LOG_LEVEL": "INFO",
            "MQ_ARCHIVE_EXPORT_SETTLE_SECONDS": "0",
            **(extra_env or {}),
        }
        self.redis_url = redis_url
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []

    def _spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log_path = self.tmp / f"{name}-{len(self.procs)}.log"
        log = open(log_path, "wb")  # noqa: SIM115
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "mqcenter", *args],
            cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
        )
        self.procs.append(proc)
        self.logs.append(log_path)
        return proc

    def worker(self, name: str) -> None:
        # Its maintenance queue and its outbound queue (check-backs, webhooks).
        queues = f"{self.queue},{self.queue}.outbound"
        self._spawn(name, "worker", "-P", "solo", "-Q", queues, "-n", f"{name}-{self.queue}@%h", "-l", "INFO", "--without-gossip",
                    "--without-mingle", "--without-heartbeat")
        wait_for(lambda: b"ready" in (self.logs[-1].read_bytes()), timeout=90, what=f"worker {name} ready")

    def beat(self) -> None:
        self._spawn("beat", "beat", "-l", "INFO", "-s", str(self.tmp / "beat-schedule"),
                    "--max-interval", "1")

    def send(self, task: str, *args: Any, queue: str | None = None) -> None:
        from kombu import Connection

        from mqcenter.celery import app

        with Connection(self.redis_url) as conn:
            app.send_task(task, args=list(args), connection=conn, queue=queue or self.queue)

    def output(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-4000:] for p in self.logs)

    def stop(self) -> None:
        stop_processes(self.procs, timeout=20)


    def forget_queue(self) -> None:
        """Drop this test's queue (and kombu's binding for it) from the shared Redis."""
        import redis

        client = redis.Redis.from_url(self.redis_url)
        for queue in (self.queue, f"{self.queue}.outbound"):
            client.delete(queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")


@pytest.fixture
def celery_procs(tmp_path: Path, transactional_db: Any) -> Iterator[CeleryProcesses]:
    """Workers/beat that see this test's committed rows (transaction=True tests)."""
    db = settings.DATABASES["default"]
    database_url = f"mysql://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 3306}/{connection.settings_dict['NAME']}"
    procs = CeleryProcesses(tmp_path, database_url=database_url)
    try:
        yield procs
    finally:
        procs.stop()
        procs.forget_queue()
