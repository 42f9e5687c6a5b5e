"""Real broker processes for end-to-end tests.

`BrokerServer` creates its own MariaDB database, migrates it, and runs
`manage.py runbroker` as a subprocess on a free port; tests talk to it over HTTP exactly as
clients do. Databases are named per purpose and run (`mq_e2e_<name>_<pid>`) so suites and
concurrent runs do not collide.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
MYSQL_URL = os.environ.get("MQ_TEST_MYSQL", "mysql://root@127.0.0.1:3306")
REDIS_URL = os.environ.get("MQ_TEST_REDIS", "redis://127.0.0.1:6379/14")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stop_processes(procs: list[subprocess.Popen[bytes]], timeout: float = 15.0) -> None:
    """SIGTERM them all, then wait for each; one that outlives `timeout` is killed."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def celery_queues(env: dict[str, str]) -> tuple[str, str]:
    """The maintenance queue and the outbound queue of the broker whose environment is `env`."""
    queue = env.get("CELERY_TASK_DEFAULT_QUEUE", "celery")
    return queue, env.get("MQ_OUTBOUND_QUEUE", f"{queue}.outbound")


def start_celery_worker(
    env: dict[str, str], output: Any = subprocess.DEVNULL, level: str = "warning", queues: str = "both"
) -> subprocess.Popen[bytes]:
    """A real Celery worker (solo pool) for the broker whose environment is `env`, taking
    jobs of its maintenance queue, its outbound queue or (by default) both."""
    maintenance, outbound = celery_queues(env)
    names = {"both": f"{maintenance},{outbound}", "maintenance": maintenance, "outbound": outbound}[queues]
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "mqcenter", "worker", "-P", "solo", "--without-gossip",
         "--without-mingle", "-Q", names, "-n", f"{queues}-{os.getpid()}-{len(names)}@%h", "-l", level],
        cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT,
    )


def wait_for_healthz(url: str, proc: subprocess.Popen[bytes], timeout: float = 60,
                     output: Callable[[], str] = lambda: "") -> None:
    """Until the broker at `url` answers /healthz; fails at once if its process exits first
    (with the tail of `output()`, its log)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"broker {url} exited with {proc.returncode}\n{output()[-3000:]}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"broker {url} did not answer /healthz within {timeout:g}s")


def mysql_recreate(database: str, port: int = 3306) -> None:
    import MySQLdb

    conn = MySQLdb.connect(host="127.0.0.1", user="root", port=port)
    try:
        cur = conn.cursor()
        cur.execute(f"DROP DATABASE IF EXISTS `{database}`")
        cur.execute(f"CREATE DATABASE `{database}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    finally:
        conn.close()


def mysql_drop(database: str, port: int = 3306) -> None:
    import MySQLdb

    conn = MySQLdb.connect(host="127.0.0.1", user="root", port=port)
    try:
        conn.cursor().execute(f"DROP DATABASE IF EXISTS `{database}`")
    finally:
        conn.close()


class BrokerServer:
    """A database plus any number of broker processes sharing it."""

    def __init__(
        self, name: str, *, database_url: str | None = None, extra_env: dict[str, str] | None = None,
        mysql_port: int = 3306, per_run: bool = True,
    ) -> None:
        # Per run (the test process's pid), so two runs at once on one machine do not drop
        # each other's databases; the bench keeps fixed names (its big tables are reused).
        self.database = f"mq_e2e_{name}_{os.getpid()}" if per_run else f"mq_e2e_{name}"
        self.mysql_port = mysql_port
        self.database_url = database_url or (
            f"{MYSQL_URL}/{self.database}" if mysql_port == 3306 else f"mysql://root@127.0.0.1:{mysql_port}/{self.database}"
        )
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "mqcenter.settings",
            "DATABASE_URL": self.database_url,
            "REDIS_URL": REDIS_URL,
            "MQ_VAR_DIR": str(ROOT / "var" / f"e2e-{name}"),
            # Its own Celery queue: a worker started for another server (another test, another
            # xdist worker) on the same Redis never takes this one's jobs.
            "CELERY_TASK_DEFAULT_QUEUE": f"mq-{self.database}",
            "MQ_HEARTBEAT_SECONDS": "2",
            # Each broker heartbeats its waiting pulls this often (`waiting_pulls`).
            "MQ_LEASE_RECOVERY_SECONDS": "0.2",
            **(extra_env or {}),
        }
        self.processes: dict[int, subprocess.Popen[bytes]] = {}
        self.started_at: dict[int, datetime] = {}  # UTC, when each port's process was started
        self.token = ""

    # --- lifecycle -----------------------------------------------------------------------

    def setup(self) -> BrokerServer:
        if self.database_url.startswith("mysql"):
            mysql_recreate(self.database, self.mysql_port)
        self.manage("migrate", "-v0")
        self.token = self.manage("createtoken", "--scope", "admin").strip()
        return self

    def manage(self, *args: str) -> str:
        result = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=self.env,
            capture_output=True, text=True, timeout=180,
        )
        if result.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{result.stderr}")
        return result.stdout

    def command(self, port: int) -> list[str]:
        """How a broker process is run (the bench serves it other ways too)."""
        return [sys.executable, "manage.py", "runbroker", "--port", str(port)]

    def process_env(self, port: int) -> dict[str, str]:
        return self.env

    def start(self, port: int | None = None) -> str:
        """Start one broker process; returns its base URL once it answers /healthz."""
        port = port or free_port()
        self.started_at[port] = datetime.now(UTC).replace(tzinfo=None)
        log = open(ROOT / "var" / f"{self.database}-{port}.log", "ab")  # noqa: SIM115
        proc = subprocess.Popen(
            self.command(port), cwd=ROOT, env=self.process_env(port), stdout=log, stderr=subprocess.STDOUT,
        )
        self.processes[port] = proc
        url = f"http://127.0.0.1:{port}"
        wait_for_healthz(url, proc)
        return url

    def kill(self, url: str, sig: int = signal.SIGKILL) -> None:
        port = int(url.rsplit(":", 1)[1])
        proc = self.processes.pop(port)
        proc.send_signal(sig)
        proc.wait(timeout=15)

    def stop(self) -> None:
        stop_processes(list(self.processes.values()), timeout=10)
        self.processes.clear()

    def teardown(self) -> None:
        self.stop()
        if self.database_url.startswith("mysql"):
            # A fault test may have left its private server down: nothing left to drop.
            with contextlib.suppress(Exception):
                mysql_drop(self.database, self.mysql_port)

    # --- a client ------------------------------------------------------------------------

    def client(self, url: str, token: str | None = None) -> httpx.Client:
        return httpx.Client(
            base_url=url, timeout=40,
            headers={"Authorization": f"Bearer {token or self.token}"},
        )

    def waiting_pulls(self) -> int:
        """Long-polls waiting in the broker processes this server runs, as each last heartbeat
        them. Not a freshness window: a loaded machine can delay a live process's heartbeat
        past any short one, and a long one would count a killed process's last word. Rows
        of a process killed earlier on the same port are older than its successor's start."""
        live = {port: self.started_at[port] for port, proc in self.processes.items() if proc.poll() is None}
        rows = self.sql("SELECT url, last_heartbeat, waiting_pulls FROM mq_registry_broker")
        return sum(int(waiting) for url, beat, waiting in rows
                   if (started := live.get(int(url.rsplit(":", 1)[1]))) is not None and beat >= started)

    def sql(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        """Read the broker's database directly (to check what is really stored)."""
        import MySQLdb

        conn = MySQLdb.connect(host="127.0.0.1", user="root", port=self.mysql_port, db=self.database)
        try:
            cur = conn.cursor()
            cur.execute(query, params)
            rows = list(cur.fetchall())
            conn.commit()
            return rows
        finally:
            conn.close()
