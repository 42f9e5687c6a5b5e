"""Celery jobs resume by themselves when Redis (their broker) comes back."""

from __future__ import annotations

import time

import pytest

from tests.support.private import PrivateRedis
from tests.support.server import BrokerServer, start_celery_worker, stop_processes

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def send_flush(server: BrokerServer) -> None:
    server.manage("shell", "-c", "from messages.tasks import *; "
                  "from mqcenter.celery import app; app.send_task('messages.maintenance.flush')")


def flush_finished_at(server: BrokerServer) -> str | None:
    rows = server.sql("SELECT last_finished_at FROM mq_maintenance_run WHERE job = 'flush'") \
        if server.sql("SHOW TABLES LIKE 'mq_maintenance_run'") else []
    return str(rows[0][0]) if rows and rows[0][0] else None


def wait_for_new_flush(server: BrokerServer, after: str | None, timeout: float) -> str | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        finished = flush_finished_at(server)
        if finished and finished != after:
            return finished
        time.sleep(0.5)
    return None


def test_it_runs_maintenance_again_after_redis_restarts(redis_server: PrivateRedis) -> None:
    env = {"REDIS_URL": redis_server.url, "CELERY_BROKER_URL": redis_server.url}
    server = BrokerServer("celeryredis", extra_env=env).setup()
    worker = start_celery_worker(server.env)
    try:
        send_flush(server)
        first = wait_for_new_flush(server, None, timeout=60)
        assert first is not None, "the worker never ran the first flush"

        redis_server.stop()
        time.sleep(2)
        redis_server.start()  # same port, empty: a restarted Redis keeps nothing here
        send_flush(server)
        second = wait_for_new_flush(server, first, timeout=90)

        assert worker.poll() is None, "the worker died with Redis"
        assert second is not None, "maintenance did not resume after Redis came back"
    finally:
        stop_processes([worker], timeout=20)
        server.teardown()
