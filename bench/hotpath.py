"""The broker's hot path, in process: `python -m bench.hotpath [--batch 100] [--rounds 30]`.

What the claim (pull) and ack services cost a message with HTTP, Django's request cycle and
the other processes out of the picture: one thread, one scratch MariaDB database, batches of
`--batch` messages. Beside each, the same statements in plain mysqlclient (the database
limit's claim and ack, trace rows included), in the same process on the same database, so
the difference is what the service adds in Python. Medians of `--rounds` batches; wall time,
so the database's own work is in both columns. Not part of `bench all`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support.server import MYSQL_URL, mysql_drop, mysql_recreate  # noqa: E402

DATABASE = "mq_e2e_bench_hotpath"
TOPIC = "hotpath"


def measure(batch: int, rounds: int) -> dict[str, float]:
    """Microseconds per message: service and plain SQL, for claim and for ack."""
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from django.db import connection

    from bench import dblimit
    from messages import validation
    from messages.services import acks, delivery
    from messages.services.produce import messages_produce
    from mqcenter.core.auth import Principal

    principal = Principal(name="bench", scopes=("admin",), biz_ids=None)
    items = validation.produce_items({"messages": [{"topic": TOPIC, "data": {"x": "y" * 180}}] * batch})

    def service_round() -> tuple[float, float]:
        messages_produce(principal=principal, items=items)
        began = time.perf_counter()
        pulled = delivery.messages_pull(principal=principal, topic=TOPIC, group="default", consumer="c1",
                                        max_messages=batch, wait_seconds=0)
        claimed = time.perf_counter()
        acks.messages_ack(principal=principal, consumer="c1",
                          results=[acks.AckResult(id=m.id, status="SUCCESS") for m in pulled])
        assert len(pulled) == batch, f"pulled {len(pulled)} of {batch}"
        return claimed - began, time.perf_counter() - claimed

    def plain_round() -> tuple[float, float]:
        messages_produce(principal=principal, items=items)
        conn = connection.connection  # the same session, outside Django's wrappers
        conn.autocommit(False)  # one commit per transaction, as the database limit runs
        try:
            began = time.perf_counter()
            rows = dblimit.claim(conn, "c1", dblimit.utc_now(), batch, topic=TOPIC, traces=True)
            claimed = time.perf_counter()
            dblimit.ack(conn, "c1", rows, dblimit.utc_now(), traces=True)
        finally:
            conn.autocommit(True)  # Django's own state for this connection
        assert len(rows) == batch, f"claimed {len(rows)} of {batch}"
        return claimed - began, time.perf_counter() - claimed

    connection.ensure_connection()
    service: list[tuple[float, float]] = []
    plain: list[tuple[float, float]] = []
    for _ in range(3):  # warm-up: caches, the connection, the table's first pages
        service_round()
        plain_round()
    for _ in range(rounds):  # interleaved, so a busy moment hits both
        service.append(service_round())
        plain.append(plain_round())
    per_message = 1e6 / batch

    def median(samples: list[tuple[float, float]], part: int) -> float:
        return statistics.median(s[part] for s in samples) * per_message

    return {"claim service": median(service, 0), "claim plain SQL": median(plain, 0),
            "ack service": median(service, 1), "ack plain SQL": median(plain, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    mysql_recreate(DATABASE)
    os.environ.update({"DATABASE_URL": f"{MYSQL_URL}/{DATABASE}", "DJANGO_SETTINGS_MODULE": "mqcenter.settings",
                       "REDIS_URL": "", "MQ_LOG_LEVEL": "WARNING"})
    try:
        figures: dict[str, Any] = measure(args.batch, args.rounds)
    finally:
        from django.db import connections

        connections.close_all()  # an open session would hold DROP DATABASE on a metadata lock
        mysql_drop(DATABASE)
    for name, micros in figures.items():
        print(f"{name:16} {micros:7.1f} us/message  (batches of {args.batch}, median of {args.rounds})")


if __name__ == "__main__":
    main()
