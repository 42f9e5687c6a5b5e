"""Benchmark the Spark reports on generated data: 1 million, 10 million messages, ...

    .venv/bin/python bench/reports.py --messages 1000000 --master 'local[2]'

Generates the messages (and ~3 trace events per message) with bulk SQL into a scratch
MariaDB database (`mq_bench_reports` by default; the schema comes from the migrations), then
times `run_trace_report` and `run_heap_report` over a 24-hour window. Rows come from
MariaDB's sequence engine (`seq_1_to_N`) in INSERT ... SELECT chunks: millions of rows in
minutes, no Python loop. Re-running with the same --messages reuses the data.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import MySQLdb

ROOT = Path(__file__).resolve().parent.parent
UNTIL = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)
WINDOW = timedelta(hours=24)
CHUNK = 500_000


def connect(db: str | None = None) -> MySQLdb.Connection:
    return MySQLdb.connect(host="127.0.0.1", port=3306, user="root", database=db or "", autocommit=True)


def prepare(db: str, messages: int) -> None:
    with connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS `{db}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    env = {**os.environ, "DATABASE_URL": f"mysql://root@127.0.0.1:3306/{db}"}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    with connect(db) as conn, conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM mq_message")
        if cur.fetchone()[0] == messages:
            print(f"reusing {messages} messages in {db}")
            return
        cur.execute("TRUNCATE mq_message")
        cur.execute("TRUNCATE mq_message_trace")
        start = time.monotonic()
        for low in range(1, messages + 1, CHUNK):
            high = min(messages, low + CHUNK - 1)
            cur.execute(message_sql(low, high, messages))
            print(f"  messages {high}/{messages} ({time.monotonic() - start:.0f}s)", flush=True)
        for low in range(1, messages + 1, CHUNK):
            high = min(messages, low + CHUNK - 1)
            for sql in trace_sql(low, high):
                cur.execute(sql)
            print(f"  traces for {high}/{messages} ({time.monotonic() - start:.0f}s)", flush=True)
        cur.execute("SELECT COUNT(*) FROM mq_message_trace")
        print(f"generated {messages} messages, {cur.fetchone()[0]} trace events in {time.monotonic() - start:.0f}s")


def message_sql(low: int, high: int, total: int) -> str:
    # h: a deterministic pseudo-random number per row; 40 topics x 2 groups, one topic hot.
    step_us = int(WINDOW.total_seconds() * 1_000_000 * 1.1 / total)
    start = (UNTIL - WINDOW * 1.1).strftime("%Y-%m-%d %H:%M:%S")
    return f"""
    INSERT INTO mq_message (id, topic, group_name, data, headers, status, effect_time, retry_remaining,
        attempt, timeout_seconds, last_log, add_time, update_time)
    SELECT s.seq,
        IF(s.h < 200, 'hot.orders', CONCAT('topic-', s.seq % 40)),
        IF(s.seq % 3 = 0, 'billing', 'default'), '{{}}', '{{}}',
        CASE WHEN s.h < 800 THEN 'SUCCESS' WHEN s.h < 850 THEN 'FAIL' WHEN s.h < 870 THEN 'TIMEOUT'
             WHEN s.h < 880 THEN 'RUNNING' ELSE 'NEW' END,
        s.t + INTERVAL IF(s.h >= 990, 3600, 0) SECOND, 0,
        CASE WHEN s.h < 800 THEN 1 + (s.h % 10 = 0) WHEN s.h < 850 THEN 3 WHEN s.h < 880 THEN 1
             ELSE s.h % 2 END,
        60, '', s.t, s.t + INTERVAL (CRC32(s.seq + 1) % 60000) * 1000 MICROSECOND
    FROM (SELECT seq, CRC32(seq) % 1000 AS h,
                 TIMESTAMP('{start}') + INTERVAL seq * {step_us} MICROSECOND AS t
          FROM seq_{low}_to_{high}) s
    """


def trace_sql(low: int, high: int) -> list[str]:
    cols = "INSERT INTO mq_message_trace (message_id, event, actor, at, attempt, status_after, log)"
    rng = f"id BETWEEN {low} AND {high}"
    return [
        f"{cols} SELECT id, 'produced', 'producer', add_time, 0, 'NEW', '' FROM mq_message WHERE {rng}",
        f"""{cols} SELECT id, 'pulled', CONCAT('consumer-', id % 8), update_time - INTERVAL (id % 5000) * 1000
            MICROSECOND, attempt, 'RUNNING', '' FROM mq_message WHERE {rng} AND attempt >= 1
            AND update_time - INTERVAL (id % 5000) * 1000 MICROSECOND >= add_time""",
        f"""{cols} SELECT id,
              CASE status WHEN 'SUCCESS' THEN 'acked' WHEN 'TIMEOUT' THEN 'lease_expired' ELSE 'nacked' END,
              IF(status = 'TIMEOUT', 'broker', CONCAT('consumer-', id % 8)), update_time, attempt,
              IF(status = 'FAIL', 'FAIL', IF(status = 'TIMEOUT', 'TIMEOUT', IF(status = 'SUCCESS', 'SUCCESS', 'NEW'))),
              IF(status IN ('FAIL', 'NEW'), ELT(1 + id % 4, 'db timeout', 'upstream 503', 'bad payload', ''), 'ok')
            FROM mq_message WHERE {rng} AND status IN ('SUCCESS', 'FAIL', 'TIMEOUT', 'NEW') AND attempt >= 1""",
    ]


def run(db: str, master: str, partitions: int, jobs: list[str]) -> dict[str, float]:
    sys.path.insert(0, str(ROOT))
    os.environ["SPARK_MASTER"] = master
    from spark.extract import JdbcSource
    from spark.jobs import ReportConfig, run_heap_report, run_trace_report
    from spark.session import spark_session

    clock = time.monotonic()
    spark_session()
    timings = {"session_start": round(time.monotonic() - clock, 1)}
    config = ReportConfig(
        source=JdbcSource(url=f"jdbc:mariadb://127.0.0.1:3306/{db}", user="root", partitions=partitions),
        since=UNTIL - WINDOW,
        until=UNTIL,
        thresholds={"hot.orders": 1000},
    )
    for name in jobs:
        job = {"trace": run_trace_report, "heap": run_heap_report}[name]
        clock = time.monotonic()
        result = job(config, lambda percent, note: print(f"    {percent:3d}% {note}", flush=True))
        timings[name] = round(time.monotonic() - clock, 1)
        if name == "trace":
            summary = f"{result['messages']} messages in the window"
        else:
            summary = f"backlog {sum(g['backlog'] for g in result['groups'])}, {len(result['alarms'])} alarms"
        print(f"  {name}: {timings[name]}s ({len(result['groups'])} groups, {summary})", flush=True)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--database", default="mq_bench_reports")
    parser.add_argument("--partitions", type=int, default=8, help="JDBC read partitions")
    parser.add_argument("--jobs", default="trace,heap", help="which reports, in order")
    parser.add_argument("--generate-only", action="store_true", help="prepare the data, run nothing")
    args = parser.parse_args()
    prepare(args.database, args.messages)
    if args.generate_only:
        return
    timings = run(args.database, args.master, args.partitions, args.jobs.split(","))
    out = {"messages": args.messages, "master": args.master, "partitions": args.partitions,
           "load_average": os.getloadavg(), **timings}
    print(json.dumps(out))
    results = ROOT / "bench" / "results"
    results.mkdir(exist_ok=True)
    (results / f"reports-{args.messages}.json").write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
