"""The peers: Celery 5 on Redis, django-q2 on the same MariaDB, RabbitMQ with pika.

Each figure is measured the way MQ Center's is: enqueue rate from 4 client threads; end to
end, a backlog enqueued first and drained by the workers, timed from the first handled task
to the last (worker start-up excluded); every no-op handler counts what it handled the same
way (`bench/workloads/counter.py`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from bench.common import KEY_ID, PYTHON, REDIS_URL, ROOT, mysql_connect, redis_client
from bench.load import _in_threads, drain_rate, redis_counter

CELERY_BROKER = "redis://127.0.0.1:6379/8"
RABBIT_URL = "amqp://guest:guest@127.0.0.1:5672/%2F"
DQ_DATABASE = "mq_e2e_bench_djangoq"
THREADS = 4


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "BENCH_REDIS_URL": REDIS_URL, "BENCH_CELERY_BROKER": CELERY_BROKER,
            "BENCH_DQ_DATABASE": DQ_DATABASE, "PYTHONPATH": str(ROOT), **extra}


@contextmanager
def _processes(commands: list[list[str]], env: dict[str, str], name: str) -> Iterator[list[subprocess.Popen[bytes]]]:
    log = open(ROOT / "var" / f"bench-{name}.log", "ab")  # noqa: SIM115
    procs = [subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True) for cmd in commands]
    try:
        yield procs
    finally:
        for proc in procs:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


# --- Celery on Redis ---------------------------------------------------------------------

CELERY_WORKER = [PYTHON, "-m", "celery", "-A", "bench.workloads.celery_app", "worker", "-c", "2",
                 "-P", "prefork", "-l", "warning", "--without-gossip", "--without-mingle",
                 "--without-heartbeat", "-n", "bench@%h", "-Q", "mqcenter-bench"]


def _celery_app():  # type: ignore[no-untyped-def]
    os.environ.update({"BENCH_REDIS_URL": REDIS_URL, "BENCH_CELERY_BROKER": CELERY_BROKER})
    from bench.workloads import celery_app

    return celery_app


def celery_enqueue(run: str, count: int) -> float:
    mod = _celery_app()
    share = count // THREADS
    seconds, _ = _in_threads(THREADS, lambda i: [mod.noop.delay(run) for _ in range(share)])
    return share * THREADS / seconds


def celery_e2e(run: str, count: int) -> tuple[float, float]:
    """(enqueue rate, drain rate) for `count` no-op tasks and one worker, concurrency 2."""
    mod = _celery_app()
    mod.app.control.purge()
    counter = redis_counter(f"bench:{KEY_ID}done:{run}")
    enqueue = celery_enqueue(run, count)
    with _processes([CELERY_WORKER], _env(), "celery"):
        return enqueue, drain_rate(counter, count // THREADS * THREADS)


def celery_latency(samples: int, gap: float = 0.02) -> list[float]:
    mod = _celery_app()
    mod.app.control.purge()
    run = f"lat{int(time.time())}"
    key = f"bench:{KEY_ID}latency:{run}"
    client = redis_client()
    with _processes([CELERY_WORKER], _env(), "celery"):
        deadline = time.monotonic() + 60
        while client.llen(key) == 0:
            if time.monotonic() > deadline:
                raise RuntimeError("the Celery worker never ran a task")
            mod.latency.delay(run, time.time())
            time.sleep(0.3)
        time.sleep(0.5)
        client.delete(key)
        for i in range(samples):
            time.sleep(gap)
            mod.latency.delay(run, time.time())
            until = time.monotonic() + 10
            while client.llen(key) < i + 1 and time.monotonic() < until:
                time.sleep(0.001)
        return [float(v) for v in client.lrange(key, 0, -1)]


# --- django-q2 (ORM broker on MariaDB) ---------------------------------------------------

def _dq_env() -> dict[str, str]:
    return _env(DJANGO_SETTINGS_MODULE="bench.workloads.dq_settings")


def djangoq_setup() -> None:
    conn = mysql_connect()
    cur = conn.cursor()
    cur.execute(f"DROP DATABASE IF EXISTS `{DQ_DATABASE}`")
    cur.execute(f"CREATE DATABASE `{DQ_DATABASE}` CHARACTER SET utf8mb4")
    conn.close()
    subprocess.run([PYTHON, "-m", "django", "migrate", "-v0"], cwd=ROOT, env=_dq_env(), check=True,
                   timeout=300)


def djangoq_e2e(run: str, count: int) -> tuple[float, float]:
    """(enqueue rate, drain rate) for `count` no-op tasks and a cluster of 2 workers."""
    conn = mysql_connect(DQ_DATABASE)
    conn.cursor().execute("DELETE FROM django_q_ormq")
    conn.commit()
    conn.close()
    counter = redis_counter(f"bench:{KEY_ID}done:{run}")
    out = subprocess.run([PYTHON, "-m", "bench.workloads.dq_tasks", run, str(count), str(THREADS)],
                         cwd=ROOT, env=_dq_env(), check=True, capture_output=True, text=True, timeout=1800)
    enqueue = float(out.stdout.strip().splitlines()[-1])
    with _processes([[PYTHON, "-m", "django", "qcluster"]], _dq_env(), "djangoq"):
        return enqueue, drain_rate(counter, count // THREADS * THREADS)


# --- RabbitMQ with pika ------------------------------------------------------------------

def rabbit_enqueue(queue: str, count: int) -> float:
    """Persistent messages to a durable queue, each confirmed by the broker, 4 threads."""
    import pika

    from bench.common import payload

    share = count // THREADS
    setup = pika.BlockingConnection(pika.URLParameters(RABBIT_URL))
    channel = setup.channel()
    channel.queue_declare(queue=queue, durable=True)
    channel.queue_purge(queue=queue)
    setup.close()
    props = pika.BasicProperties(delivery_mode=pika.DeliveryMode.Persistent, content_type="application/json")
    lock = threading.Lock()

    def work(i: int) -> None:
        import json

        with lock:  # pika connections are not thread-safe; each thread opens its own
            connection = pika.BlockingConnection(pika.URLParameters(RABBIT_URL))
        ch = connection.channel()
        ch.confirm_delivery()
        for n in range(share):
            ch.basic_publish(exchange="", routing_key=queue, body=json.dumps(payload(n)),
                             properties=props, mandatory=True)
        connection.close()

    seconds, _ = _in_threads(THREADS, work)
    return share * THREADS / seconds


def rabbit_e2e(run: str, count: int, consumers: int = 4) -> tuple[float, float]:
    queue = f"bench-{run}"
    counter = redis_counter(f"bench:{KEY_ID}done:{run}")
    enqueue = rabbit_enqueue(queue, count)
    commands = [[PYTHON, "-m", "bench.workloads.rabbit_consumer", queue, run] for _ in range(consumers)]
    try:
        with _processes(commands, _env(), "rabbit"):
            return enqueue, drain_rate(counter, count // THREADS * THREADS)
    finally:
        import pika

        connection = pika.BlockingConnection(pika.URLParameters(RABBIT_URL))
        connection.channel().queue_delete(queue=queue)
        connection.close()
