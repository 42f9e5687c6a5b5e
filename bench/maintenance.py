"""How long each maintenance job takes on a table of N messages (default 1 million).

    .venv/bin/python -m bench.maintenance [--messages 1000000]

Builds a scratch MariaDB database (`mq_bench_maint`, dropped and recreated), fills it with
fast INSERT ... SELECT over MariaDB's sequence engine (no HTTP, no ORM), then runs each job
in-process exactly as the Celery task does (through `maintenance_run`) and prints the
timings; also written to bench/results/maintenance.json.

Mix per 100 messages, 10 topics, one group each:
  50 SUCCESS finished 10 days ago (past the 7 days retention: archived by cleanup)
  10 SUCCESS finished an hour ago           5 FAIL finished 10 days ago (archived)
  20 NEW deliverable (an hour old)          10 NEW delayed, due over the next 2 hours
   5 RUNNING with an expired lease (the retry job recovers them)
Trace: produced for every message, plus acked / dead / pulled: ~1.7 events per message,
all within the last 30 minutes, so the first flush has the whole trace to count.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATABASE = os.environ.get("MQ_BENCH_MAINT_DB", "mq_bench_maint")


def configure() -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "mqcenter.settings"
    os.environ["DATABASE_URL"] = f"mysql://root@127.0.0.1:3306/{DATABASE}"
    os.environ["REDIS_URL"] = ""  # wake-ups stay in this process
    os.environ["CELERY_BROKER_URL"] = "memory://"
    os.environ["MQ_VAR_DIR"] = str(ROOT / "var" / "bench-maint")
    os.environ["MQ_ARCHIVE_PARQUET_DIR"] = str(ROOT / "var" / "bench-maint" / "archive")
    os.environ["EMAIL_BACKEND"] = "django.core.mail.backends.locmem.EmailBackend"
    os.environ["MQ_ARCHIVE_EXPORT_SETTLE_SECONDS"] = "0"  # export in the same run as the archive
    os.environ.setdefault("DB_READ_TIMEOUT", "600")
    os.environ.setdefault("DB_WRITE_TIMEOUT", "600")
    sys.path.insert(0, str(ROOT))


def recreate_database() -> None:
    import MySQLdb

    conn = MySQLdb.connect(host="127.0.0.1", user="root", port=3306)
    try:
        cur = conn.cursor()
        cur.execute(f"DROP DATABASE IF EXISTS `{DATABASE}`")
        cur.execute(f"CREATE DATABASE `{DATABASE}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    finally:
        conn.close()


def fill(messages: int) -> float:
    """Insert the messages and their trace with set-based SQL. Returns seconds taken."""
    from django.db import connection, transaction

    from topics.models import Topic, TopicGroup

    started = time.monotonic()
    for i in range(10):
        topic = Topic.objects.create(
            name=f"t{i:02d}", retention_days=7, retry_count=3, backlog_alarm_threshold=1000,
            alarm_emails=["ops@example.com"],
        )
        TopicGroup.objects.create(topic=topic, name="default")
    pad = "x" * 150
    status_sql = """
        CASE WHEN MOD(seq, 100) < 60 THEN 'SUCCESS' WHEN MOD(seq, 100) < 65 THEN 'FAIL'
             WHEN MOD(seq, 100) < 95 THEN 'NEW' ELSE 'RUNNING' END"""
    update_sql = """
        CASE WHEN MOD(seq, 100) < 50 OR MOD(seq, 100) BETWEEN 60 AND 64
             THEN UTC_TIMESTAMP(6) - INTERVAL 10 DAY ELSE UTC_TIMESTAMP(6) - INTERVAL 1 HOUR END"""
    effect_sql = """
        CASE WHEN MOD(seq, 100) BETWEEN 85 AND 94 THEN UTC_TIMESTAMP(6) + INTERVAL (MOD(seq, 7200)) SECOND
             ELSE UTC_TIMESTAMP(6) - INTERVAL 1 HOUR END"""
    step = 100_000
    with connection.cursor() as cur:
        for low in range(1, messages + 1, step):
            high = min(messages, low + step - 1)
            with transaction.atomic():
                cur.execute(f"""
                    INSERT INTO mq_message (topic, group_name, data, msg_key, headers, status, effect_time,
                        retry_remaining, attempt, timeout_seconds, dedup_key, lease_owner, lease_expires_at,
                        last_log, add_time, update_time)
                    SELECT CONCAT('t', LPAD(MOD(seq, 10), 2, '0')), 'default',
                        CONCAT('{{"n":', seq, ',"pad":"{pad}"}}'), NULL, '{{}}', {status_sql}, {effect_sql},
                        IF(MOD(seq, 100) >= 95, 1, 3), IF(MOD(seq, 100) < 65 OR MOD(seq, 100) >= 95, 1, 0), 60, NULL,
                        IF(MOD(seq, 100) >= 95, 'bench-consumer', NULL),
                        IF(MOD(seq, 100) >= 95, UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE, NULL), '',
                        UTC_TIMESTAMP(6) - INTERVAL 10 DAY, {update_sql}
                    FROM seq_1_to_{messages} WHERE seq BETWEEN %s AND %s""", [low, high])
        # The trace, all within the last 30 minutes (so the flush counts it into buckets).
        at = "UTC_TIMESTAMP(6) - INTERVAL 1800 SECOND + INTERVAL (MOD(id, 1700)) SECOND"
        for event, where, status in (
            ("produced", "1=1", "'NEW'"),
            ("acked", "status = 'SUCCESS'", "'SUCCESS'"),
            ("dead", "status = 'FAIL'", "'FAIL'"),
            ("pulled", "status = 'RUNNING'", "'RUNNING'"),
        ):
            last = 0
            while True:
                cur.execute("SELECT MAX(id) FROM (SELECT id FROM mq_message WHERE id > %s ORDER BY id LIMIT %s) x",
                            [last, step])
                (top,) = cur.fetchone()
                if top is None:
                    break
                with transaction.atomic():
                    cur.execute(f"""
                        INSERT INTO mq_message_trace (message_id, event, actor, at, attempt, `rank`, total,
                            status_after, log)
                        SELECT id, '{event}', 'bench', {at}, attempt, NULL, NULL, {status}, ''
                        FROM mq_message WHERE id > %s AND id <= %s AND {where}""", [last, top])
                last = top
        cur.execute("ANALYZE TABLE mq_message, mq_message_trace")
        cur.fetchall()
    return time.monotonic() - started


def timed(job: str, work: Any) -> dict[str, Any]:
    from messages.services import maintenance_run

    started = time.monotonic()
    result = maintenance_run(job=job, work=work)
    return {"job": job, "seconds": round(time.monotonic() - started, 3), "result": result}


def run_jobs() -> list[dict[str, Any]]:
    from messages.services import (
        alarms_check,
        maintenance_cleanup,
        maintenance_delay,
        maintenance_retry,
        stats_flush,
    )

    rows: list[dict[str, Any]] = []
    scheduled: list[Any] = []

    def report(row: dict[str, Any]) -> None:
        rows.append(row)
        print(f"  {row['job']:<24} {row['seconds']:>9.3f} s   {json.dumps(row['result'], default=str)}", flush=True)

    # flush: catch up with the whole trace (bounded runs of 50 x 20000 events), then steady
    runs = 0
    while True:
        row = timed("flush", stats_flush)
        runs += 1
        row["job"] = f"flush (catch-up run {runs})"
        report(row)
        if row["result"]["events"] == 0 or runs >= 5:
            break
    row = timed("flush", stats_flush)
    row["job"] = "flush (steady state)"
    report(row)
    report(timed("retry", maintenance_retry))
    row = timed("delay", lambda: maintenance_delay(schedule=lambda pairs, at: scheduled.append((pairs, at))))
    report(row)
    runs = 0
    while True:
        row = timed("cleanup", maintenance_cleanup)
        runs += 1
        row["job"] = f"cleanup (run {runs})"
        report(row)
        if row["result"]["archived"] == 0 or runs >= 6:
            break
    report(timed("alarms", alarms_check))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--keep", action="store_true", help="keep the scratch database afterwards")
    args = parser.parse_args()
    configure()
    recreate_database()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    print(f"filling {args.messages} messages ...", flush=True)
    fill_seconds = fill(args.messages)
    from messages.models import Message, MessageTrace

    counts = {"messages": Message.objects.count(), "trace_rows": MessageTrace.objects.count()}
    print(f"  filled in {fill_seconds:.1f} s: {counts}", flush=True)
    print("jobs:", flush=True)
    rows = run_jobs()
    results_dir = ROOT / "bench" / "results"
    results_dir.mkdir(parents=True, exist_ok=True)
    out = {"messages": args.messages, "fill_seconds": round(fill_seconds, 1), **counts, "jobs": rows,
           "cpus": os.cpu_count()}
    (results_dir / "maintenance.json").write_text(json.dumps(out, indent=2, default=str))
    print(f"written to {results_dir / 'maintenance.json'}")
    if not args.keep:
        import MySQLdb

        conn = MySQLdb.connect(host="127.0.0.1", user="root", port=3306)
        conn.cursor().execute(f"DROP DATABASE IF EXISTS `{DATABASE}`")
        conn.close()


if __name__ == "__main__":
    main()
