"""Seed a database with N messages for the console list benchmark (bench/console_bench.py).

    .venv/bin/python bench/console_seed.py --database mq_bench_console --rows 1000000

Creates (drops first) the database, migrates it, and inserts messages spread over 50 topics
in 5 business lines, with a realistic status mix, by multi-row INSERTs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import MySQLdb

ROOT = Path(__file__).resolve().parents[1]
STATUSES = ["SUCCESS"] * 70 + ["NEW"] * 15 + ["RUNNING"] * 2 + ["FAIL"] * 10 + ["TIMEOUT"] * 3
REASONS = ["ConnectionError: upstream refused", "ValueError: bad order id", "KeyError: 'sku'", ""]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database", default="mq_bench_console")
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    conn = MySQLdb.connect(host="127.0.0.1", user="root", port=3306, charset="utf8mb4")
    cur = conn.cursor()
    cur.execute(f"DROP DATABASE IF EXISTS `{args.database}`")
    cur.execute(f"CREATE DATABASE `{args.database}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "mqcenter.settings",
           "DATABASE_URL": f"mysql://root@127.0.0.1:3306/{args.database}"}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    cur.execute(f"USE `{args.database}`")
    now = datetime.now(UTC).replace(tzinfo=None)
    for b in range(5):
        cur.execute("INSERT INTO topics_biz (name, title, description, created_at) VALUES (%s,%s,'',%s)",
                    (f"biz{b}", f"Business {b}", now))
    cur.execute("SELECT id FROM topics_biz ORDER BY id")
    biz_ids = [r[0] for r in cur.fetchall()]
    for t in range(50):
        cur.execute(
            "INSERT INTO topics_topic (name, biz_id, owner, description, retry_count, retry_strategy,"
            " retry_interval_seconds, timeout_seconds, retention_days, alarm_emails,"
            " backlog_alarm_threshold, paused, created_at, updated_at)"
            " VALUES (%s,%s,'','',3,'fixed',10,60,7,'[]',NULL,0,%s,%s)",
            (f"topic{t:02d}", biz_ids[t % 5], now, now),
        )
    conn.commit()
    rng = random.Random(7)
    sql = ("INSERT INTO mq_message (topic, group_name, data, msg_key, headers, status, effect_time,"
           " retry_remaining, attempt, timeout_seconds, dedup_key, lease_owner, lease_expires_at,"
           " last_log, add_time, update_time) VALUES ")
    batch: list[str] = []
    for i in range(args.rows):
        status = rng.choice(STATUSES)
        added = now - timedelta(seconds=(args.rows - i) * 604800 / args.rows)
        data = json.dumps({"order": i, "sku": f"SKU-{rng.randint(1, 99999)}", "note": "x" * 40})
        log = rng.choice(REASONS) if status in ("FAIL", "TIMEOUT") else ""
        batch.append(conn.literal((
            f"topic{rng.randint(0, 49):02d}", rng.choice(["default", "billing"]), data,
            f"key-{i}", "{}", status, added, 0, 1, 60, None, None, None, log, added, added,
        )).decode())
        if len(batch) >= 5000:
            cur.execute(sql + ",".join(batch))
            conn.commit()
            batch = []
    if batch:
        cur.execute(sql + ",".join(batch))
        conn.commit()
    cur.execute("ANALYZE TABLE mq_message")
    cur.fetchall()
    print(f"seeded {args.rows} messages into {args.database}")


if __name__ == "__main__":
    main()
