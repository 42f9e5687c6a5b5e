"""Where the delivery latency goes: `python -m bench.latency_split [--samples N] [--serving NAME]`.

Runs the latency figure's workload (one idle SDK consumer, one message at a time, 20 ms
apart) and splits each sample at the two moments the broker records with the message:
- the produce call's start (client clock) -> the broker's PRODUCED time (the row's add_time:
  the request reached the produce service);
- PRODUCED -> PULLED (insert, commit, wake-up, and the claim's start in the waiting pull);
  zero when the produce hands the message to the waiting pull (messages/services/handoff.py:
  the row's `pulled_at` is then its add_time; `handed_to` on rows stored before session 15);
- PULLED -> the handler's start (claim transaction or, handed off, the produce's insert and
  its commit; pull answer, SDK dispatch).
One machine, one clock. Prints medians; not part of `bench all`.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC
from statistics import median

from bench import load
from bench.common import DEFAULT_SERVING, BenchBroker, mysql_connect

TOPIC = "latsplit"


def split(broker: BenchBroker, samples: int) -> dict[str, float]:
    handler = load.sdk_latency(broker, TOPIC, samples)
    conn = mysql_connect(broker.database)
    try:
        cur = conn.cursor()
        cur.execute(
            # A message's "produced" event is its row's add_time; its "pulled" event is the row's
            # pulled_at (a hand-off's: the add time), or on older rows handed off, `handed_to`
            # at the add time: no trace row holds them.
            "SELECT m.data, m.add_time, CASE WHEN m.handed_to IS NULL THEN m.pulled_at ELSE m.add_time END"
            " FROM mq_message m"
            " WHERE m.topic = %s AND (m.handed_to IS NOT NULL OR m.pulled_at IS NOT NULL)"
            " ORDER BY m.id DESC LIMIT %s", (TOPIC, samples))
        rows = cur.fetchall()
    finally:
        conn.close()
    to_broker, to_claim = [], []
    for data, produced, pulled in rows:
        t0 = json.loads(data)["t0"]
        produced_at = produced.replace(tzinfo=UTC).timestamp()
        to_broker.append(produced_at - t0)
        to_claim.append(pulled.replace(tzinfo=UTC).timestamp() - produced_at)
    total = median(handler) * 1000
    parts = {"call start -> PRODUCED": median(to_broker) * 1000, "PRODUCED -> PULLED": median(to_claim) * 1000}
    return {"produce call start -> handler start": total, **parts,
            "PULLED -> handler start (the rest)": total - sum(parts.values())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--serving", default=DEFAULT_SERVING)
    args = parser.parse_args()
    broker = BenchBroker("latsplit", serving=args.serving)
    broker.setup()
    broker.start()
    try:
        for name, ms in split(broker, args.samples).items():
            print(f"{name:40} p50 {ms:6.2f} ms")
    finally:
        broker.teardown()


if __name__ == "__main__":
    main()
