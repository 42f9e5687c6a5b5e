"""Fair delivery across keys: what a fair group's claim costs against a plain group's.

    MQ_BENCH_ID=me .venv/bin/python -m bench.fair [--backlog 100000] [--keys 10000] [--claims 200] [--batch 100]

In one process, without HTTP: one topic with two subscribed groups, `fair` (`fair_keys`)
and `plain`, each holding the same backlog of `--backlog` NEW messages spread evenly over
`--keys` distinct keys (stored in key order, as bursts of each key), and with `--burst N`, N
messages of one more key stored before them (one tenant's burst). Then `--claims` claims
of `--batch` per group, fair and plain taking turns (the same sitting, the same drift), each
claim in autocommit as a broker makes it (`messages_claim`: its own transaction, leases
written). A claim takes at most a few percent of the backlog, so the last claims see about
the backlog the first saw. Answers µs per claim (median, p90) and statements per claim
(MariaDB's `Questions` counter) for each, and the fair/plain ratio. With `--index-cost R`,
then the INSERT rate of 100-row batches with and without `ix_msg_fair`, R runs each,
alternating (the index's cost to every produce, database side). MariaDB only (the
loose index scan is the point); a scratch database, `mq_fair_<MQ_BENCH_ID>`, dropped after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time


def main(backlog: int, keys: int, claims: int, batch: int, burst: int = 0, index_cost: int = 0) -> dict[str, object]:
    database = f"mq_fair_{os.environ.get('MQ_BENCH_ID', 'bench')}"
    os.environ["DATABASE_URL"] = f"mysql://root@127.0.0.1:3306/{database}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mqcenter.settings")
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-" + "k" * 40)
    os.environ.setdefault("MQ_LOG_LEVEL", "WARNING")
    import MySQLdb

    admin = MySQLdb.connect(host="127.0.0.1", user="root", port=3306)
    admin.cursor().execute(f"DROP DATABASE IF EXISTS `{database}`")
    admin.cursor().execute(f"CREATE DATABASE `{database}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    from messages.delivery.claims import messages_claim
    from messages.delivery.sql_insert import NewMessage, insert_values
    from messages.models import Message, Status
    from mqcenter.core.auth import Principal
    from topics.models import Topic, TopicGroup

    try:
        call_command("migrate", verbosity=0)
        topic = Topic.objects.create(name="fair")
        TopicGroup.objects.create(topic=topic, name="fair", fair_keys=True)
        TopicGroup.objects.create(topic=topic, name="plain")
        now = timezone.now()
        per_key = max(1, backlog // keys)
        for group in ("fair", "plain"):
            rows = [NewMessage(topic="fair", group_name=group, data=f'{{"n":{n}}}', key=f"tenant-{n // per_key:05d}",
                               headers={}, status=Status.NEW, effect_time=now, retry_remaining=3, attempt=0,
                               timeout_seconds=60, dedup_key=None, last_log="", add_time=now, update_time=now,
                               producer="bench", publish_id=None)
                    for n in range(backlog)]
            rows[:0] = [row._replace(key="tenant-burst") for row in rows[:1]] * burst  # one key's burst first
            for start in range(0, len(rows), 5000):
                insert_values(Message, rows[start:start + 5000], return_ids=False)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE TABLE mq_message")
            cursor.fetchall()
        broker = Principal(name="bench", scopes=("admin",), biz_ids=None)
        with connection.cursor() as cursor:  # the key scan's plan: "Using index for group-by" is the loose scan
            cursor.execute(
                "EXPLAIN SELECT DISTINCT topic, group_name, status, msg_key FROM mq_message FORCE INDEX (ix_msg_fair) "
                "WHERE topic = 'fair' AND group_name = 'fair' AND status = 'NEW' AND msg_key > 'tenant-00005' LIMIT %s",
                [batch])
            names = [c[0] for c in cursor.description]
            plan = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

        def questions() -> int:
            with connection.cursor() as cursor:
                cursor.execute("SHOW SESSION STATUS LIKE 'Questions'")
                return int(cursor.fetchone()[1])

        timings: dict[str, list[float]] = {"fair": [], "plain": []}
        statements: dict[str, int] = {"fair": 0, "plain": 0}
        distinct: dict[str, list[int]] = {"fair": [], "plain": []}
        for group in ("fair", "plain"):  # warm: the topic cache, the group's consumer row
            messages_claim(principal=broker, topic="fair", group=group, consumer="warm", max_messages=batch)
        for _ in range(claims):
            for group in ("fair", "plain"):
                before = questions()
                started = time.perf_counter()
                got = messages_claim(principal=broker, topic="fair", group=group, consumer="c1",
                                     max_messages=batch).messages
                timings[group].append((time.perf_counter() - started) * 1e6)
                statements[group] += questions() - before - 1  # the SHOW itself
                if len(got) != batch:
                    raise RuntimeError(f"{group}: a claim took {len(got)} of {batch}")
                distinct[group].append(len({m.key for m in got}))

        def figure(group: str) -> dict[str, float]:
            values = sorted(timings[group])
            return {"us_per_claim_p50": round(statistics.median(values)),
                    "us_per_claim_p90": round(values[int(len(values) * 0.9)]),
                    "claims_per_s": round(1e6 / statistics.median(values)),
                    "statements_per_claim": round(statements[group] / claims, 2),
                    "distinct_keys_per_claim": statistics.median(distinct[group])}

        out: dict[str, object] = {"backlog_per_group": backlog + burst, "keys": keys, "burst": burst, "batch": batch, "claims": claims,
                                  "fair": figure("fair"), "plain": figure("plain"),
                                  "key_scan_plan": [{k: p[k] for k in ("type", "key", "rows", "Extra")} for p in plan]}
        out["fair_over_plain_p50"] = round(statistics.median(timings["fair"]) / statistics.median(timings["plain"]), 2)
        if index_cost:
            out["insert_rows_per_s"] = _index_cost(index_cost)
        out["load_average_1m"] = os.getloadavg()[0]
        return out
    finally:
        connection.close()
        admin.cursor().execute(f"DROP DATABASE IF EXISTS `{database}`")
        admin.close()


def _index_cost(rounds: int) -> dict[str, object]:
    """Rows/s of 100-row INSERTs (each committed, 20,000 rows a run, half of them keyed) into
    the same table with `ix_msg_fair` and without it (dropped and made again), alternating:
    the database's side of what the index costs a produce."""
    from django.db import connection
    from django.utils import timezone

    from messages.delivery.sql_insert import NewMessage, insert_values
    from messages.models import Message, Status

    def run(start: int) -> float:
        began = time.perf_counter()
        for b in range(200):
            now = timezone.now()
            rows = [NewMessage(topic="ins", group_name="g", data=f'{{"n":{n},"pad":"{"x" * 180}"}}',
                               key=f"k{n % 5000}" if n % 2 else None, headers={}, status=Status.NEW,
                               effect_time=now, retry_remaining=3, attempt=0, timeout_seconds=60, dedup_key=None,
                               last_log="", add_time=now, update_time=now, producer="bench", publish_id=None)
                    for n in range(start + b * 100, start + b * 100 + 100)]
            with connection.cursor() as cursor:
                cursor.execute("START TRANSACTION")
                insert_values(Message, rows, return_ids=True)
                cursor.execute("COMMIT")
        return 20_000 / (time.perf_counter() - began)

    rates: dict[str, list[float]] = {"with": [], "without": []}
    run(0)  # warm
    for r in range(rounds):
        for name in ("with", "without"):
            with connection.cursor() as cursor:
                if name == "with" and r:
                    cursor.execute("CREATE INDEX ix_msg_fair ON mq_message (topic, group_name, status, msg_key, effect_time)")
                elif name == "without":
                    cursor.execute("DROP INDEX ix_msg_fair ON mq_message")
            rates[name].append(run((2 * r + 1 + (name == "without")) * 20_000))
    return {**{name: [round(v) for v in values] for name, values in rates.items()},
            "with_over_without": round(statistics.median(rates["with"]) / statistics.median(rates["without"]), 3)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--backlog", type=int, default=100_000, help="NEW messages per group")
    parser.add_argument("--keys", type=int, default=10_000, help="distinct keys they are spread over")
    parser.add_argument("--claims", type=int, default=200, help="claims per group")
    parser.add_argument("--batch", type=int, default=100, help="messages per claim")
    parser.add_argument("--burst", type=int, default=0, help="messages of one more key, stored first")
    parser.add_argument("--index-cost", type=int, default=0, metavar="ROUNDS",
                        help="then INSERT rows/s with and without ix_msg_fair, this many rounds each")
    args = parser.parse_args()
    print("RESULT " + json.dumps(main(args.backlog, args.keys, args.claims, args.batch, args.burst, args.index_cost)))
