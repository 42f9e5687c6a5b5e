"""Statements per delivered message: deterministic counts of what the database is asked,
where the rates of a shared machine are noise. `python -m bench.statements [--messages N]`.

In one process, through the whole Django stack (middleware, authentication, the views): a
producer posts N messages in batches of 100, then a consumer drains them as the SDK does
(pulls of 100, each carrying the acks of the batch before, a last ack of its own), then
one message is produced and pulled alone (the idle path). The counts are MariaDB's own
per-session counters (`SHOW SESSION STATUS`) of the one connection the requests share:
statements sent (`Questions`), SELECT / INSERT / UPDATE, explicit COMMITs and the storage
engine's commits (`Handler_commit`, which also counts each autocommitted statement), each
divided by the messages it served. Runs on a scratch database, `mq_stmts_<MQ_BENCH_ID>`.

It only uses what every revision of the project has (settings, the REST API), so `bench.ab`
runs the same text in each tree it compares.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

COUNTERS = ("Questions", "Com_select", "Com_insert", "Com_insert_select", "Com_update", "Com_commit", "Handler_commit")


def main(messages: int = 1000) -> dict[str, dict[str, float]]:
    database = f"mq_stmts_{os.environ.get('MQ_BENCH_ID', 'bench')}"
    os.environ["DATABASE_URL"] = f"mysql://root@127.0.0.1:3306/{database}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mqcenter.settings")
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-" + "k" * 40)
    os.environ.setdefault("MQ_TOKEN_RATE", "100000000/min")
    os.environ.setdefault("MQ_LOG_LEVEL", "WARNING")
    import MySQLdb

    admin = MySQLdb.connect(host="127.0.0.1", user="root", port=3306)
    admin.cursor().execute(f"DROP DATABASE IF EXISTS `{database}`")
    admin.cursor().execute(f"CREATE DATABASE `{database}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    try:
        call_command("migrate", verbosity=0)
        from io import StringIO

        out = StringIO()
        call_command("createtoken", "--scope", "admin", stdout=out)
        token = out.getvalue().strip()
        client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")

        def post(path: str, body: dict[str, Any]) -> Any:
            answer = client.post(path, json.dumps(body), content_type="application/json")
            if answer.status_code not in (200, 201):
                raise RuntimeError(f"{path}: {answer.status_code} {answer.content[:300]!r}")
            return answer.json()

        def counters() -> dict[str, int]:
            with connection.cursor() as cursor:
                marks = ",".join(["%s"] * len(COUNTERS))
                cursor.execute(f"SHOW SESSION STATUS WHERE Variable_name IN ({marks})", COUNTERS)
                return {name: int(value) for name, value in cursor.fetchall()}

        def per_message(before: dict[str, int], count: int) -> dict[str, float]:
            after = counters()
            # the SHOW itself is one question
            return {name: round((after[name] - before[name] - (name == "Questions")) / count, 3) for name in COUNTERS}

        # warm up: the topic and group exist, caches are filled, as on a broker that has run
        post("/api/v1/messages", {"messages": [{"topic": "stmts", "data": {"n": -1}}]})
        warm = post("/api/v1/pull", {"topic": "stmts", "consumer": "c1", "max_messages": 100, "wait_seconds": 0})
        post("/api/v1/ack", {"consumer": "c1", "results": [{"id": m["id"], "status": "SUCCESS"}
                                                           for m in warm["messages"]]})
        figures: dict[str, dict[str, float]] = {}

        before = counters()
        for start in range(0, messages, 100):
            post("/api/v1/messages", {"messages": [{"topic": "stmts", "data": {"n": i, "pad": "x" * 180}}
                                                   for i in range(start, min(messages, start + 100))]})
        figures["produce"] = per_message(before, messages)

        before = counters()
        results: list[dict[str, object]] = []
        delivered = 0
        while True:
            answer = post("/api/v1/pull", {"topic": "stmts", "consumer": "c1", "max_messages": 100, "wait_seconds": 0,
                                           **({"results": results} if results else {})})
            got = answer["messages"]
            delivered += len(got)
            results = [{"id": m["id"], "status": "SUCCESS"} for m in got]
            if not got:
                break
        figures["pull_ack"] = per_message(before, delivered)
        if delivered != messages:
            raise RuntimeError(f"delivered {delivered} of {messages}")

        before = counters()
        for i in range(20):
            post("/api/v1/messages", {"messages": [{"topic": "stmts", "data": {"n": i}}]})
            one = post("/api/v1/pull", {"topic": "stmts", "consumer": "c1", "max_messages": 10, "wait_seconds": 0})
            post("/api/v1/ack", {"consumer": "c1", "results": [{"id": m["id"], "status": "SUCCESS"}
                                                               for m in one["messages"]]})
        figures["idle_produce_pull_ack"] = per_message(before, 20)
        return figures
    finally:
        connection.close()
        admin.cursor().execute(f"DROP DATABASE IF EXISTS `{database}`")
        admin.close()


if __name__ == "__main__":
    count = int(sys.argv[sys.argv.index("--messages") + 1]) if "--messages" in sys.argv else 1000
    print("RESULT " + json.dumps(main(count)))
