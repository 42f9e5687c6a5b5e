"""Big tables: millions of finished and delayed rows, generated in SQL (never over HTTP).

Rows are made by doubling: a seed of 1,000 rows, then `INSERT ... SELECT` of chunks of the
table into itself, each chunk one statement and one commit. The finished rows share the
topic and group the pull measures (the worst case for the claim query): 98% SUCCESS, 1% FAIL,
1% TIMEOUT, so a status filter in the console has something rare to find. Delayed rows are
NEW with an effect_time a month ahead.
"""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from bench.common import BenchBroker, mysql_connect, payload
from bench.dblimit import INSERT_MESSAGE, message_row

TOPIC, GROUP = "bench", "default"
COLUMNS = ("topic, group_name, data, msg_key, headers, status, effect_time, retry_remaining, attempt,"
           " timeout_seconds, dedup_key, lease_owner, lease_expires_at, last_log, add_time, update_time, producer")


def _status_of(i: int) -> str:
    return "FAIL" if i % 100 == 7 else "TIMEOUT" if i % 100 == 8 else "SUCCESS"


def counts(database: str) -> dict[str, int]:
    conn = mysql_connect(database)
    cur = conn.cursor()
    # exact counts are fine here: this is the bench checking its own fixture, not a page
    cur.execute("SELECT status, COUNT(*) FROM mq_message GROUP BY status")
    found = {status: n for status, n in cur.fetchall()}
    conn.close()
    return found


SEED = 100_000


def _seed_table(cur: Any, name: str, rows: list[tuple[Any, ...]]) -> None:
    """A plain copy-source table: inserting from another table needs no temporary table
    (an INSERT ... SELECT from mq_message into itself does, in MariaDB's tmpdir)."""
    cur.execute(f"DROP TABLE IF EXISTS {name}")
    cur.execute(f"CREATE TABLE {name} AS SELECT {COLUMNS} FROM mq_message WHERE 1=0")
    for start in range(0, len(rows), 5000):
        cur.executemany(INSERT_MESSAGE.replace("mq_message", name, 1), rows[start:start + 5000])


def _fill(database: str, name: str, rows: list[tuple[Any, ...]], have: int, target: int,
          log: Any) -> None:
    conn = mysql_connect(database, charset="utf8mb4")
    conn.autocommit(True)
    cur = conn.cursor()
    _seed_table(cur, name, rows)
    began = time.monotonic()
    while have < target:
        take = min(len(rows), target - have)
        cur.execute(f"INSERT INTO mq_message ({COLUMNS}) SELECT {COLUMNS} FROM {name} LIMIT %s", (take,))
        have += cur.rowcount
        log(f"  rows: {have:,} of {target:,} ({time.monotonic() - began:.0f}s)")
    cur.execute(f"DROP TABLE {name}")
    conn.close()


def grow_finished(database: str, target: int, log: Any = print) -> None:
    """Add finished rows until there are `target` of them."""
    have = sum(n for s, n in counts(database).items() if s in ("SUCCESS", "FAIL", "TIMEOUT"))
    past = datetime.now(UTC).replace(tzinfo=None) - timedelta(days=1)
    rows = [message_row(json.dumps(payload(i)), _status_of(i), past, past) for i in range(min(SEED, target))]
    _fill(database, "bench_seed_finished", rows, have, target, log)


def add_delayed(database: str, target: int, log: Any = print) -> None:
    """NEW rows due a month from now, until there are `target` of them."""
    later = datetime.now(UTC).replace(tzinfo=None) + timedelta(days=30)
    have = counts(database).get("NEW", 0)
    rows = [message_row(json.dumps(payload(i)), "NEW", later, later) for i in range(min(SEED, target))]
    _fill(database, "bench_seed_delayed", rows, have, target, log)
    conn = mysql_connect(database)
    cur = conn.cursor()
    cur.execute("ANALYZE TABLE mq_message")
    cur.fetchall()
    conn.close()


def take_due(database: str) -> None:
    """Remove the NEW rows that are due (left over by a measurement) so the next one starts
    from the same state."""
    conn = mysql_connect(database)
    conn.autocommit(True)
    conn.cursor().execute("DELETE FROM mq_message WHERE status IN ('NEW', 'RUNNING') AND effect_time <= NOW(6) + INTERVAL 1 DAY")
    conn.close()


# --- the console -------------------------------------------------------------------------

def console_session(broker: BenchBroker, username: str = "bench", password: str = "bench-pass-123") -> httpx.Client:
    """A client logged in to the console as a superuser (created if missing)."""
    env_before = dict(broker.env)
    broker.env.update({"DJANGO_SUPERUSER_PASSWORD": password, "DJANGO_SUPERUSER_USERNAME": username,
                       "DJANGO_SUPERUSER_EMAIL": "bench@example.com"})
    try:
        broker.manage("createsuperuser", "--noinput")
    except RuntimeError as exc:
        if "already" not in str(exc):
            raise
    finally:
        broker.env.clear()
        broker.env.update(env_before)
    client = httpx.Client(base_url=broker.url, timeout=60, follow_redirects=False)
    page = client.get("/login/")
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    if page.status_code != 200 or match is None:
        raise RuntimeError(f"no console login form (GET /login/ answered {page.status_code})")
    answer = client.post("/login/", data={"csrfmiddlewaretoken": match.group(1), "username": username,
                                          "password": password}, headers={"Referer": f"{broker.url}/login/"})
    if answer.status_code not in (302, 303):
        raise RuntimeError(f"console login failed ({answer.status_code})")
    return client


def page_times(client: httpx.Client, path: str, samples: int, check: str | None = None) -> list[float]:
    """Seconds per GET of `path` (after one warm-up request); each must answer 200."""
    times: list[float] = []
    for i in range(samples + 1):
        began = time.perf_counter()
        answer = client.get(path)
        elapsed = time.perf_counter() - began
        if answer.status_code != 200:
            raise RuntimeError(f"GET {path} answered {answer.status_code}")
        if check is not None and check not in answer.text:
            raise RuntimeError(f"GET {path} does not show {check!r}")
        if i:
            times.append(elapsed)
    return times
