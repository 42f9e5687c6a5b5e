"""What every figure shares: sizes, repeated runs, the results file, brokers under test.

Services are the real ones of the machine (MariaDB on 127.0.0.1:3306 as root, Redis on
127.0.0.1:6379, RabbitMQ on 127.0.0.1:5672); the bench uses its own database names
(`mq_e2e_bench*`, `mq_bench_*`) and its own Redis database index, so it never touches what
tests use. Engineers sharing a machine each set MQ_BENCH_ID: every broker database then
ends in `_<MQ_BENCH_ID>`, and the Redis keys of the bench's counters carry it.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tests.support.server import ROOT, BrokerServer

RESULTS_DIR = Path(os.environ.get("MQ_BENCH_RESULTS", ROOT / "bench" / "results"))
REDIS_DB = int(os.environ.get("MQ_BENCH_REDIS_DB", "7"))
REDIS_URL = f"redis://127.0.0.1:6379/{REDIS_DB}"
BENCH_ID = os.environ.get("MQ_BENCH_ID", "")
KEY_ID = f"{BENCH_ID}:" if BENCH_ID else ""  # in the Redis keys of the bench's counters
MYSQL = {"host": "127.0.0.1", "user": "root", "port": 3306}
# The database under test: MariaDB, or PostgreSQL (`python -m bench --database postgres`),
# whose figures are stored under the same names with DB_SUFFIX and judged against its own
# limit (`dblimit` run on PostgreSQL).
DATABASE = os.environ.get("MQ_BENCH_DATABASE", "mariadb")
POSTGRES_URL = os.environ.get("MQ_BENCH_POSTGRES", "postgres://root@127.0.0.1:5432")
POSTGRES = DATABASE == "postgres"
DB_SUFFIX = "_pg" if POSTGRES else ""
DB_PROCESS = "postgres" if POSTGRES else "mariadbd"
DB_PART = "postgresql" if POSTGRES else "mariadb"  # its name in "where the CPU goes"
PYTHON = sys.executable
PAYLOAD = "x" * 180  # with the JSON wrapper a message's data is ~200 bytes


def payload(index: int) -> dict[str, Any]:
    return {"n": index, "pad": PAYLOAD}


# --- sizes -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scale:
    """How big each figure runs. `toy` is for the smoke test, `full` for the report."""

    name: str
    repeats: int
    produce_messages: int  # per run, across the 4 client threads
    e2e_messages: int  # MQ Center and the database limit
    peer_messages: int  # Celery and RabbitMQ (a rate is a rate)
    djangoq_messages: int  # django-q2's ORM broker runs at ~100 msg/s here
    latency_samples: int
    backlog_finished: int
    backlog_delayed: int
    console_small: int
    longpoll_consumers: int
    serving_seconds: float
    serving_messages: int
    soak_seconds: float


SCALES = {
    "toy": Scale("toy", 1, 400, 400, 200, 100, 5, 2_000, 200, 1_000, 20, 1.0, 400, 4.0),
    "small": Scale("small", 3, 10_000, 10_000, 3_000, 1_000, 50, 200_000, 20_000, 100_000, 200, 4.0, 4_000, 30.0),
    "full": Scale("full", 3, 50_000, 100_000, 20_000, 5_000, 200, 10_000_000, 1_000_000, 1_000_000, 1_000,
                  5.0, 10_000, 600.0),
}


# --- measuring ---------------------------------------------------------------------------


def summary(values: Iterable[float]) -> dict[str, Any]:
    """Median with min and max: what the report states for every repeated figure."""
    values = [float(v) for v in values]
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "runs": values,
    }


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


def repeat(times: int, run: Callable[[int], float]) -> dict[str, Any]:
    return summary(run(i) for i in range(times))


def machine_load() -> float:
    return os.getloadavg()[0]


def cpu_seconds(pids: Iterable[int]) -> float:
    """User + system CPU the processes used so far (those that are gone count nothing)."""
    return sum(_ticks(pids).values()) / os.sysconf("SC_CLK_TCK")


def _ticks(pids: Iterable[int]) -> dict[int, int]:
    """User + system CPU clock ticks of each process so far (one that is gone is left out)."""
    ticks = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks[pid] = int(fields[11]) + int(fields[12])  # utime + stime
    return ticks


class CpuMeter:
    """CPU seconds each part's processes use from now until `used()`, counting the processes
    a part starts meanwhile (PostgreSQL starts one per connection); each part is a function
    listing its processes. A process that ends before `used()` is not counted at all."""

    def __init__(self, parts: dict[str, Callable[[], Iterable[int]]]) -> None:
        self.parts = parts
        self.before = {part: _ticks(find()) for part, find in parts.items()}

    def used(self) -> dict[str, float]:
        return {part: sum(t - self.before[part].get(pid, 0) for pid, t in _ticks(find()).items())
                / os.sysconf("SC_CLK_TCK") for part, find in self.parts.items()}


def cpu_split(figure: dict[str, Any] | None, fmt: Callable[[Any], str], separator: str = "; ") -> str:
    """A figure's CPU µs per message by part ("where the CPU goes"), "" when not measured."""
    if not figure or not figure.get("cpu_us_per_message"):
        return ""
    return separator.join(f"{part} {fmt(value)}" for part, value in figure["cpu_us_per_message"].items())


def pids_named(name: str) -> list[int]:
    """Processes whose command name is `name` (e.g. the database server)."""
    found = []
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() == name:
                found.append(int(comm.parent.name))
        except OSError:
            continue
    return found


# --- results -----------------------------------------------------------------------------


@dataclass
class Results:
    """Every figure of a run, kept in one JSON file that several subcommands add to."""

    path: Path = field(default_factory=lambda: RESULTS_DIR / "results.json")
    data: dict[str, Any] = field(default_factory=dict)

    def load(self) -> Results:
        if self.path.exists():
            self.data = json.loads(self.path.read_text())
        return self

    def put(self, figure: str, value: dict[str, Any]) -> None:
        value = {**value, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                 "load_avg_1m": round(machine_load(), 2), "database": DATABASE}
        self.data.setdefault("figures", {})[figure + DB_SUFFIX] = value
        self.save()

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.data, indent=2, default=str))


# --- the broker under test ---------------------------------------------------------------


@dataclass(frozen=True)
class Serving:
    """One way of serving the broker: the command that runs it and a label for the report."""

    label: str
    kind: str  # runbroker | gunicorn-uvicorn
    workers: int = 1
    threads: int = 0
    env: tuple[tuple[str, str], ...] = ()  # extra environment of the server processes

    def command(self, port: int) -> list[str]:
        bind = f"127.0.0.1:{port}"
        if self.kind == "runbroker":
            return [PYTHON, "manage.py", "runbroker", "--port", str(port), "--workers", str(self.workers)]
        gunicorn = [PYTHON, "-m", "gunicorn", "-b", bind, "-w", str(self.workers), "--log-level", "warning"]
        if self.kind == "gunicorn-uvicorn":
            return [*gunicorn, "-k", "uvicorn.workers.UvicornWorker", "mqcenter.asgi:application"]
        raise ValueError(self.kind)


SERVINGS = {
    "uvicorn1": Serving("runbroker (uvicorn, 1 worker)", "runbroker", 1),
    "uvicorn2": Serving("runbroker (uvicorn, 2 workers)", "runbroker", 2),
    "gunicorn-uvicorn2": Serving("gunicorn + UvicornWorker, 2 workers (the same ASGI app as runbroker)", "gunicorn-uvicorn", 2),
}
DEFAULT_SERVING = os.environ.get("MQ_BENCH_SERVING", "uvicorn2")


class BenchBroker(BrokerServer):
    """A BrokerServer whose processes can be served by any of SERVINGS."""

    def __init__(self, name: str = "bench", *, serving: str = DEFAULT_SERVING, **extra_env: str) -> None:
        if BENCH_ID:
            name = f"{name}_{BENCH_ID}"
        database_url = f"{POSTGRES_URL}/mq_e2e_{name}" if POSTGRES else None
        super().__init__(name, per_run=False, database_url=database_url, extra_env={"REDIS_URL": REDIS_URL, "MQ_LOG_LEVEL": "WARNING",
                                                         "DJANGO_SECRET_KEY": os.environ.get("DJANGO_SECRET_KEY", "bench-only-" + "k" * 40),
                                                         "MQ_TOKEN_RATE": "100000000/min", **extra_env})
        self.serving = SERVINGS[serving]
        self.url = ""

    def command(self, port: int) -> list[str]:
        return self.serving.command(port)

    def process_env(self, port: int) -> dict[str, str]:
        return {**self.env, **dict(self.serving.env), "MQ_ADVERTISED_URL": f"http://127.0.0.1:{port}"}

    def start(self, port: int | None = None) -> str:
        self.url = super().start(port)
        # every worker answers; give the others a moment to finish importing
        time.sleep(0.5 if self.serving.workers > 1 else 0)
        return self.url

    def pids(self) -> list[int]:
        """Every process of the server: the ones started and all their descendants."""
        children: dict[int, list[int]] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        found: list[int] = []
        todo = [proc.pid for proc in self.processes.values() if proc.poll() is None]
        while todo:
            pid = todo.pop()
            found.append(pid)
            todo.extend(children.get(pid, []))
        return found

    def rss_mb(self) -> float:
        """Resident memory of every process of the broker (master and workers)."""
        total = 0
        for pid in self.pids():
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
            except OSError:
                continue
        return total / 2**20

    def setup(self) -> BenchBroker:
        if POSTGRES:
            postgres_recreate(self.database)
        super().setup()
        return self

    def teardown(self) -> None:
        super().teardown()
        if POSTGRES:
            postgres_drop(self.database)

    def sql(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        if not POSTGRES:
            return super().sql(query, *params)
        with db_connect(self.database) as conn, conn.cursor() as cur:
            cur.execute(query, params)
            return list(cur.fetchall()) if cur.description else []

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def truncate(self) -> None:
        """Empty the message tables between runs (kept: topics, tokens, registry)."""
        self.sql("TRUNCATE TABLE mq_message")
        self.sql("TRUNCATE TABLE mq_message_trace")


def mysql_connect(database: str | None = None, **kwargs: Any) -> Any:
    import MySQLdb

    conn = MySQLdb.connect(**MYSQL, **({"db": database} if database else {}), **kwargs)
    return conn


def db_connect(database: str, **kwargs: Any) -> Any:
    """A DB-API connection (not autocommitting) to `database` on the database under test."""
    if POSTGRES:
        import psycopg

        conn = psycopg.connect(f"{POSTGRES_URL}/{database}")
        conn.execute("SET TIME ZONE 'UTC'")  # naive datetimes are UTC, as in MariaDB
        conn.commit()
        return conn
    return mysql_connect(database, charset="utf8mb4", **kwargs)


def _postgres_admin(statement: str) -> None:
    import psycopg

    with psycopg.connect(f"{POSTGRES_URL}/postgres", autocommit=True) as conn:
        conn.execute(statement)  # type: ignore[arg-type]  # names from the bench, not input


def postgres_recreate(database: str) -> None:
    _postgres_admin(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
    _postgres_admin(f'CREATE DATABASE "{database}"')


def postgres_drop(database: str) -> None:
    _postgres_admin(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def redis_client() -> Any:
    import redis

    return redis.Redis.from_url(REDIS_URL)


def as_dict(obj: Any) -> dict[str, Any]:
    return asdict(obj)
