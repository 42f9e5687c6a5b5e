"""The database limit: MQ Center's work done with the plain driver (mysqlclient, or psycopg
with `--database postgres`), no HTTP, no Django.

Same table (created by the project's migrations in a scratch database), same rows, same
statements as the broker's hot paths, at READ COMMITTED:
- insert: batches of 100 rows, one multi-row INSERT and one commit per batch, 4 processes;
- claim + ack: 4 consumer processes, each loop `SELECT ... ORDER BY effect_time, id LIMIT 100
  FOR UPDATE SKIP LOCKED` + `UPDATE ... RUNNING` (one commit), then `UPDATE ... SUCCESS`
  (one commit), until the backlog is empty.
`traces=True` also does the trace work MQ Center does, in the same transactions: the claim's
UPDATE stores the pull in the row (`pulled_at`, rank, total), and an ack writes an "acked"
trace row only for a later attempt (a first delivery's success is held by its row, as in
messages/delivery/trace.py, so the bench's acks write none). That is the same durable work
as the broker, which the plain figure
leaves out. A produce writes no trace row (a message's "produced" event is its row), so the
insert is the broker's whole durable work for a produce.
"""

from __future__ import annotations

import multiprocessing
import queue
import time
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

import MySQLdb

from bench.common import (
    DB_PART,
    DB_PROCESS,
    POSTGRES,
    BenchBroker,
    CpuMeter,
    db_connect,
    payload,
    pids_named,
)

TOPIC, GROUP = "bench", "default"
BATCH = 100
PROCESSES = 4

INSERT_MESSAGE = (
    "INSERT INTO mq_message (topic, group_name, data, msg_key, headers, status, effect_time,"
    " retry_remaining, attempt, timeout_seconds, dedup_key, lease_owner, lease_expires_at,"
    " last_log, add_time, update_time, producer) VALUES"
    " (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
RANK = '"rank"' if POSTGRES else "`rank`"  # a reserved word in MySQL 8 and MariaDB
INSERT_TRACE = (
    f"INSERT INTO mq_message_trace (message_id, event, actor, at, attempt, {RANK}, total,"
    " status_after, log) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
# mysqlclient turns executemany into one multi-row INSERT only when VALUES holds nothing
# but placeholders; a literal in it silently means one round trip per row.


def message_row(data: str, status: str, effect_time: datetime, now: datetime,
                topic: str = TOPIC, group: str = GROUP) -> tuple[Any, ...]:
    """The values of INSERT_MESSAGE for one message as produce stores it."""
    return (topic, group, data, None, "{}", status, effect_time, 3, 0, 60, None, None, None, "", now, now, "bench")


def trace_values(message_id: int, event: str, actor: str, at: datetime, attempt: int, status: str) -> tuple[Any, ...]:
    return (message_id, event, actor, at, attempt, None, None, status, "")


def scratch_database(name: str = "bench_limit") -> str:
    """A migrated, empty copy of the schema; returns its name."""
    server = BenchBroker(name)  # fixed name: `figures.database_limit` drops it
    server.setup()
    return server.database


def _connect(database: str) -> Any:
    conn = db_connect(database)
    if not POSTGRES:  # PostgreSQL's default is READ COMMITTED
        conn.cursor().execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        conn.autocommit(False)
    return conn


def utc_now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _insert_worker(database: str, count: int, start_at: float, out: Any, release: Any) -> None:
    import json

    conn = _connect(database)
    cur = conn.cursor()
    while time.time() < start_at:
        time.sleep(0.001)
    began, cpu = time.time(), time.process_time()
    done = 0
    while done < count:
        n = min(BATCH, count - done)
        now = utc_now()
        rows = [message_row(json.dumps(payload(done + i)), "NEW", now, now) for i in range(n)]
        cur.executemany(INSERT_MESSAGE, rows)
        conn.commit()
        done += n
    out.put(((began, time.time(), count), time.process_time() - cpu))
    release.wait(RELEASE_SECONDS)
    conn.close()


def claim(conn: Any, consumer: str, now: datetime, limit: int = BATCH, *, topic: str = TOPIC,
          traces: bool = False) -> list[tuple[int, int]]:
    """One claim transaction: lock up to `limit` deliverable rows, lease them (and trace
    them). Returns the claimed (id, attempt) rows."""
    cur = conn.cursor()
    cur.execute(
        "SELECT id, attempt FROM mq_message WHERE topic=%s AND group_name=%s AND status='NEW'"
        " AND effect_time <= %s ORDER BY priority DESC, effect_time, id LIMIT %s FOR UPDATE SKIP LOCKED",
        (topic, GROUP, now, limit),
    )
    rows = list(cur.fetchall())
    if rows:
        ids = [r[0] for r in rows]
        pull = ", pulled_at=%s, pulled_rank=0, pulled_total=4" if traces else ""
        cur.execute(
            f"UPDATE mq_message SET status='RUNNING', lease_owner=%s, lease_expires_at=%s,"
            f" attempt=attempt+1, update_time=%s{pull} WHERE id IN ({_marks(ids)}) AND status='NEW'",
            (consumer, now + timedelta(seconds=65), now, *([now] if traces else []), *ids),
        )
    conn.commit()
    return rows


def ack(conn: Any, consumer: str, rows: list[tuple[int, int]], now: datetime, *, traces: bool = False) -> None:
    """One ack transaction for claimed rows: lock them, mark them SUCCESS (and trace the
    acks of later attempts)."""
    cur = conn.cursor()
    ids = [r[0] for r in rows]
    cur.execute(f"SELECT id FROM mq_message WHERE id IN ({_marks(ids)}) FOR UPDATE", ids)
    cur.fetchall()
    cur.execute(
        f"UPDATE mq_message SET status='SUCCESS', lease_expires_at=NULL, update_time=%s WHERE id IN ({_marks(ids)})",
        (now, *ids),
    )
    later = [(i, a) for i, a in rows if a + 1 > 1]  # a first delivery's success: its row holds it
    if traces and later:
        cur.executemany(INSERT_TRACE, [trace_values(i, "acked", consumer, now, a + 1, "SUCCESS") for i, a in later])
    conn.commit()


def _marks(ids: list[int]) -> str:
    return ",".join(["%s"] * len(ids))


def _claim_worker(database: str, traces: bool, start_at: float, out: Any, release: Any) -> None:
    conn = _connect(database)
    consumer = f"dblimit-{multiprocessing.current_process().pid}"
    while time.time() < start_at:
        time.sleep(0.001)
    began, cpu, processed = time.time(), time.process_time(), 0
    while rows := _retried(claim, conn, consumer, traces=traces):
        # ack: a separate transaction, as a consumer acks after its handler ran
        _retried(ack, conn, consumer, rows, traces=traces)
        processed += len(rows)
    out.put(((began, time.time(), processed), time.process_time() - cpu))
    release.wait(RELEASE_SECONDS)
    conn.close()


# MariaDB's deadlock and lock-wait errors: the transaction was rolled back and may simply run
# again, as the broker's own claims and acks do (`mqcenter.core.db.retry_on_lock_conflict`). Four
# claimers at once meet one now and then.
RETRYABLE = (1213, 1205)
# PostgreSQL's: deadlock detected, lock not available, serialization failure.
RETRYABLE_PG = ("40P01", "55P03", "40001")


def _retryable(exc: Exception) -> bool:
    if isinstance(exc, MySQLdb.OperationalError):
        return exc.args[0] in RETRYABLE
    return getattr(exc, "sqlstate", None) in RETRYABLE_PG


def _retried(step: Any, conn: Any, *args: Any, **kwargs: Any) -> Any:
    for attempt in range(5):
        try:
            return step(conn, *args, utc_now(), **kwargs)
        except Exception as exc:
            conn.rollback()
            if not _retryable(exc) or attempt == 4:
                raise
    raise AssertionError("unreachable")


# How long a worker that is done keeps its connection for the parent's CPU reading (`_run`):
# the parent releases them all once the last is done, so this only bounds a parent that died.
RELEASE_SECONDS = 3600


class Spans(NamedTuple):
    """What the worker processes of one `_run` did: each one's (began, ended, rows), and the
    CPU seconds the database server and the workers themselves spent meanwhile."""

    spans: list[tuple[float, float, int]]
    database_cpu: float
    clients_cpu: float

    def rate(self) -> float:
        """Rows per second, from the first worker's start to the last one's end."""
        return sum(s[2] for s in self.spans) / (max(s[1] for s in self.spans) - min(s[0] for s in self.spans))

    def cpu_us_per_row(self) -> dict[str, float]:
        rows = sum(s[2] for s in self.spans)
        return {DB_PART: self.database_cpu / rows * 1e6, "clients": self.clients_cpu / rows * 1e6}


def _run(target: Any, args_of: list[tuple[Any, ...]]) -> Spans:
    ctx = multiprocessing.get_context("fork")
    out, release = ctx.Queue(), ctx.Event()
    start_at = time.time() + 0.5
    procs = [ctx.Process(target=target, args=(*args, start_at, out, release)) for args in args_of]
    meter = CpuMeter({"database": lambda: pids_named(DB_PROCESS)})
    for proc in procs:
        proc.start()
    results: list[Any] = []
    try:
        while len(results) < len(procs):
            try:
                results.append(out.get(timeout=5))
            except queue.Empty:
                if any(proc.exitcode not in (None, 0) for proc in procs):
                    raise RuntimeError("a database-limit worker process failed") from None
        # Read while the workers still hold their connections: a PostgreSQL backend that
        # ended would not be counted.
        database_cpu = meter.used()["database"]
    finally:
        release.set()
    for proc in procs:
        proc.join()
    return Spans([span for span, _ in results], database_cpu, sum(cpu for _, cpu in results))


def _reset(database: str) -> None:
    conn = db_connect(database)
    cur = conn.cursor()
    cur.execute("TRUNCATE TABLE mq_message")
    cur.execute("TRUNCATE TABLE mq_message_trace")
    conn.commit()
    conn.close()


def analyze(database: str) -> None:
    """On PostgreSQL, statistics for a backlog put in at once. Built by produces over time,
    autovacuum would have gathered them; without any, PostgreSQL estimates a group's due rows
    at one and may sort them all on every claim instead of reading them along the claim's
    index (docs/benchmarks.md, "PostgreSQL"). MariaDB keeps its statistics itself."""
    if not POSTGRES:
        return
    conn = db_connect(database)
    try:
        conn.cursor().execute("ANALYZE mq_message")
        conn.commit()
    finally:
        conn.close()


def insert_rate(database: str, messages: int, cpu: dict[str, float] | None = None) -> float:
    """Messages per second inserted by 4 processes in batches of 100 (fresh table). With
    `cpu`, also fills in the CPU µs per message of the database server and the 4 clients."""
    _reset(database)
    run = _run(_insert_worker, [(database, messages // PROCESSES)] * PROCESSES)
    if cpu is not None:
        cpu.update(run.cpu_us_per_row())
    return run.rate()


def claim_ack_rate(database: str, messages: int, *, traces: bool = False, cpu: dict[str, float] | None = None) -> float:
    """Messages per second claimed and acked by 4 processes in batches of 100. With `cpu`,
    also fills in the CPU µs per message of the database server and the 4 clients: beside
    the broker's end to end, the database's part shows what the broker's statements cost
    against these same statements."""
    _reset(database)
    _run(_insert_worker, [(database, messages // PROCESSES)] * PROCESSES)
    analyze(database)
    run = _run(_claim_worker, [(database, traces)] * PROCESSES)
    total = sum(s[2] for s in run.spans)
    if total != messages // PROCESSES * PROCESSES:
        raise RuntimeError(f"claimed {total} of {messages}: rows were lost or taken twice")
    if cpu is not None:
        cpu.update(run.cpu_us_per_row())
    return run.rate()


def idle_round_trips(database: str, samples: int, gap: float = 0.02) -> dict[str, float]:
    """What one statement costs a client idle for `gap` s before it, as each sample of the
    latency figure is (medians, ms): `SELECT 1`, and a one-row INSERT committed on its own
    (autocommit), which is the broker's whole database work for a one-message produce. Both
    wake the server; the INSERT's commit also waits for the redo log to reach the disk
    (innodb_flush_log_at_trx_commit=1): the durability a produce's 201 promises."""
    import json
    import statistics

    from bench.common import mysql_connect  # the latency figure runs on MariaDB only

    conn = mysql_connect(database, charset="utf8mb4")
    conn.autocommit(True)
    cursor = conn.cursor()
    now = utc_now()
    row = message_row(json.dumps(payload(0)), "SUCCESS", now, now, topic="bench-idle-probe")
    took: dict[str, list[float]] = {"select_p50_ms": [], "insert_commit_p50_ms": []}
    try:
        for _ in range(samples):
            for name, statement, args in (("select_p50_ms", "SELECT 1", None),
                                          ("insert_commit_p50_ms", INSERT_MESSAGE, row)):
                time.sleep(gap)
                began = time.perf_counter()
                cursor.execute(statement, args)
                cursor.fetchall()
                took[name].append((time.perf_counter() - began) * 1000)
        cursor.execute("DELETE FROM mq_message WHERE topic = 'bench-idle-probe'")
    finally:
        conn.close()
    return {name: statistics.median(values) for name, values in took.items()}
