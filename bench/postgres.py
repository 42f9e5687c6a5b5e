"""The broker on PostgreSQL in the report: `python -m bench --database postgres dblimit
produce e2e` stores its figures as `*_pg`, each judged against PostgreSQL's own limit (the
same statements run with psycopg on the same machine), not against MariaDB's."""

from __future__ import annotations

from typing import Any

from bench.common import cpu_split

Row = tuple[str, str, str, str, str]  # figure, MQ Center, baseline, target, verdict


def postgres_rows(f: dict[str, Any], fmt: Any, ratio: Any, verdict: Any) -> list[Row]:
    rows: list[Row] = []
    for label, mine, limit, limit_label in (
        (
            "produce throughput on PostgreSQL, msg/s",
            "mq_produce_pg",
            "dblimit_insert_pg",
            "PostgreSQL limit insert",
        ),
        (
            "end-to-end throughput on PostgreSQL, msg/s (4 SDK processes)",
            "mq_e2e_pg",
            "dblimit_claim_ack_pg",
            "PostgreSQL limit claim+ack",
        ),
    ):
        mq, db = f.get(mine), f.get(limit)
        if not mq and not db:
            continue
        r = ratio(mq, db)
        rows.append(
            (
                label,
                fmt(mq),
                f"{limit_label} {fmt(db)}; ratio " + (f"{r:.2f}" if r else "—"),
                "≥ 0.5 x its DB limit",
                verdict(r >= 0.5 if r else None),
            )
        )
    # End to end beside the limit that does the broker's trace work too, when it was measured.
    for name, limits, what in (("mq_produce_pg", ("dblimit_insert_pg",), "a produce"),
                               ("mq_e2e_pg", ("dblimit_claim_ack_with_traces_pg", "dblimit_claim_ack_pg"), "end to end")):
        limit = next((f[key] for key in limits if f.get(key)), None)
        split, baseline = cpu_split(f.get(name), fmt), cpu_split(limit, fmt, ", ")
        if split or baseline:
            rows.append((f"  where the CPU goes on PostgreSQL ({what}), µs per message", split or "—",
                         f"PostgreSQL limit: {baseline}" if baseline else "", "info", ""))
    return rows
