"""What the indexes of `mq_message` cost the database: the database limit (`bench.dblimit`'s
insert and claim+ack, the plain driver, no broker) on the table as the migrations make it and
on variants of it, alternating in one sitting.

    MQ_BENCH_ID=me .venv/bin/python -m bench.indexes [--messages 100000] [--rounds 2] --variant NAME=DDL;DDL... [...]

Each variant is a scratch database migrated as usual and then altered by its statements
(`;`-separated; docs/benchmarks.md, "Indexes and status changes" has the ones measured so
far). A status change of a row (NEW to RUNNING, RUNNING to SUCCESS) rewrites the entry of every index holding `status`, so their number sets
most of the database's work per delivered message; a variant's figures say what a redesign
of the table's read paths would gain before anyone writes it. The variants'
schemas only need to serve `bench.dblimit`'s statements (its claim reads along
`ix_msg_priority`): a variant is a measurement, not a schema the broker could run on.

Prints per variant the median insert and claim+ack rates (msg/s), their ratios to the
migrations' table, and the redo log MariaDB wrote per message in the claim+ack runs
(`Innodb_os_log_written`). MariaDB only; the scratch databases are dropped after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

from bench import dblimit
from bench.common import BenchBroker, db_connect


def scratch_name(name: str) -> str:
    return f"idx_{name}_{os.environ.get('MQ_BENCH_ID', 'bench')}"


def variant_database(name: str, statements: str) -> str:
    """A migrated scratch database whose table the `;`-separated statements then alter."""
    database = dblimit.scratch_database(scratch_name(name))
    with db_connect(database) as conn, conn.cursor() as cursor:
        for statement in filter(None, (s.strip() for s in statements.split(";"))):
            cursor.execute(statement)
    return database


def _redo_bytes() -> int:
    with db_connect("mysql") as conn, conn.cursor() as cursor:
        cursor.execute("SHOW GLOBAL STATUS LIKE 'Innodb_os_log_written'")
        return int(cursor.fetchone()[1])


def main(messages: int, rounds: int, variants: dict[str, str]) -> dict[str, dict[str, object]]:
    if dblimit.POSTGRES:
        raise SystemExit("bench.indexes measures MariaDB's indexes: run it without --database postgres")
    databases = {"migrations": variant_database("migrations", ""),
                 **{name: variant_database(name, statements) for name, statements in variants.items()}}
    figures: dict[str, dict[str, list[float]]] = {name: {"insert": [], "claim_ack": [], "redo": []} for name in databases}
    try:
        for _ in range(rounds):
            for name, database in databases.items():
                figures[name]["insert"].append(dblimit.insert_rate(database, messages))
                before = _redo_bytes()
                figures[name]["claim_ack"].append(dblimit.claim_ack_rate(database, messages))
                # the claim+ack run inserts its backlog first: the redo of both, per message
                figures[name]["redo"].append((_redo_bytes() - before) / messages)
                print(json.dumps({"variant": name, **{k: round(v[-1]) for k, v in figures[name].items()}}), flush=True)
    finally:
        for name in databases:
            BenchBroker(scratch_name(name)).teardown()
    base = {k: statistics.median(v) for k, v in figures["migrations"].items()}
    out: dict[str, dict[str, object]] = {}
    for name, values in figures.items():
        medians = {k: statistics.median(v) for k, v in values.items()}
        out[name] = {"insert_msg_s": round(medians["insert"]), "claim_ack_msg_s": round(medians["claim_ack"]),
                     "insert_ratio": round(medians["insert"] / base["insert"], 3),
                     "claim_ack_ratio": round(medians["claim_ack"] / base["claim_ack"], 3),
                     "redo_bytes_per_msg": round(medians["redo"])}
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000, help="messages per insert and claim+ack run")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each variant, alternating")
    parser.add_argument("--variant", action="append", required=True, metavar="NAME=DDL;DDL...",
                        help="statements altering the migrated table (repeat for more variants)")
    args = parser.parse_args()
    chosen = dict(v.split("=", 1) for v in args.variant)
    print("RESULT " + json.dumps(main(args.messages, args.rounds, chosen)))
