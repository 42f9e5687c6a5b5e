"""Database statements per request: `python -m bench.statements [--requests 300]`.

One broker process (runbroker, 1 worker) on a scratch database and one keep-alive client
send, back to back, 1-message produces carrying a dedup key as the SDK's do, then pulls of 1
message each followed by its ack. MariaDB's global counters before and after give the
statements each request cost (`Questions`: every statement the clients sent), and of them
the transaction starts (`Com_begin`), autocommit switches (`Com_set_option`) and SELECTs;
and the pings, which are not statements (`Com_admin_commands`: Django's connection health
check). The counters are server-wide: run it on an otherwise idle
database. Not part of `bench all`.
"""

from __future__ import annotations

import argparse
import uuid
from typing import Any

from bench import load
from bench.common import BenchBroker, mysql_connect
from bench.request_cost import connect, send

COUNTERS = ("Questions", "Com_begin", "Com_set_option", "Com_select", "Com_admin_commands")


def _counters(cursor: Any) -> dict[str, int]:
    names = ", ".join(f"'{name}'" for name in COUNTERS)
    cursor.execute(f"SHOW GLOBAL STATUS WHERE Variable_name IN ({names})")
    return {name: int(value) for name, value in cursor.fetchall()}


def measure(requests: int) -> dict[str, dict[str, float]]:
    broker = BenchBroker("statements", serving="uvicorn1")
    broker.setup()
    broker.start()
    db = mysql_connect()
    try:
        load.ensure_topic(broker, "st")
        conn, headers = connect(broker)

        def produce() -> None:
            send(conn, headers, "POST", "/api/v1/messages",
                 {"messages": [{"topic": "st", "data": 1, "dedup_key": f"sdk-{uuid.uuid4()}"}]})

        def pull_and_ack() -> None:
            _, answer = send(conn, headers, "POST", "/api/v1/pull",
                             {"topic": "st", "consumer": "c1", "max_messages": 1, "wait_seconds": 0})
            [message] = answer["messages"]
            send(conn, headers, "POST", "/api/v1/ack",
                 {"consumer": "c1", "results": [{"id": message["id"], "status": "SUCCESS"}]})

        produce()  # warm: the topic's group row and the broker's caches
        cursor = db.cursor()
        out = {}
        for name, request in (("produce 1 message (with a dedup key)", produce), ("pull 1 + ack 1", pull_and_ack)):
            before = _counters(cursor)
            for _ in range(requests):
                request()
            after = _counters(cursor)
            # The SHOW of `after` is itself one statement.
            out[name] = {counter: (after[counter] - before[counter] - (counter == "Questions")) / requests
                         for counter in COUNTERS}
        conn.close()
        return out
    finally:
        db.close()
        broker.teardown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    print(f"{'request':40} " + " ".join(f"{c:>19}" for c in COUNTERS))
    for name, counts in measure(args.requests).items():
        print(f"{name:40} " + " ".join(f"{counts[c]:19.2f}" for c in COUNTERS))
    print(f"(per request, {args.requests} requests each; server-wide counters)")


if __name__ == "__main__":
    main()
