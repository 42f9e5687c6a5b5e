"""Where a long-poll burst's time goes: `python -m bench.burst_split [--consumers 1000]
[--bursts 5] [--serving uvicorn1]`.

The long-poll figure's burst (`figures.longpoll`: that many pulls wait, one produce of as many
messages wakes them all), repeated on one broker, and per burst:
- the wake times from the produce call's start: the first answer, p50, p99 and the last (the
  first is the produce's own work: validation, reservation, INSERT, commit; last minus first
  is the spread, answering one pull after another);
- how long the produce call took (its answer goes out after the pulls' answers it woke);
- CPU time per thread in that window, from /proc schedstat (ns, so exact for short
  windows): the broker's event loop ("loop", and how long it waited for a core: "loop
  queued"), its other threads ("threads"), the client, MariaDB. A loop busy for the whole
  spread means the broker sets the pace; a client busier than the loop means the client does.
With several broker processes the loop and threads are the process with the highest pid's.
Not part of `bench all`.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import httpx

from bench import load
from bench.common import BenchBroker, percentile, pids_named
from bench.figures import waiting_pulls

TOPIC = "burst"


def thread_times(pid: int) -> dict[str, tuple[float, float]]:
    """ms on a core and ms queued for one, per kind of thread of `pid`: "loop" (the main
    thread: the event loop) and "threads" (all others)."""
    times: dict[str, tuple[float, float]] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            ran, queued, _ = (int(v) for v in (task / "schedstat").read_text().split())
        except (OSError, ValueError):
            continue  # a thread that ended meanwhile
        kind = "loop" if task.name == str(pid) else "threads"
        before = times.get(kind, (0.0, 0.0))
        times[kind] = (before[0] + ran / 1e6, before[1] + queued / 1e6)
    return times


def _cpu(pids: list[int]) -> dict[str, tuple[float, float]]:
    broker, client, *mariadb = pids
    times = thread_times(broker)
    times["client"] = thread_times(client).get("loop", (0.0, 0.0))
    times["mariadb"] = (sum(ran for pid in mariadb for ran, _ in thread_times(pid).values()), 0.0)
    return times


def burst(broker: BenchBroker, count: int) -> dict[str, Any]:
    client, _ = waiting_pulls(broker, TOPIC, count)
    time.sleep(0.5)
    pids = [max(broker.pids()), client.pid, *pids_named("mariadbd"), *pids_named("mysqld")]
    before = _cpu(pids)
    with httpx.Client(base_url=broker.url, headers=broker.headers(), timeout=60) as http:
        began = time.time()
        http.post("/api/v1/messages", json={"messages": [{"topic": TOPIC, "data": {"t0": began}}] * count}
                  ).raise_for_status()
        call = time.time() - began
    time.sleep(0.05)  # the last answers' reading, before the client parses and leaves
    after = _cpu(pids)
    out, _ = client.communicate(timeout=120)
    answers = json.loads(out.strip().splitlines()[-1])
    woken = sorted(a["at"] - began for a in answers if a["status"] == 200 and a["messages"])
    if not woken:
        raise RuntimeError(f"no pull was answered with a message: {answers[:3]}")
    split = {"served": len(woken), "first_ms": woken[0] * 1000, "p50_ms": percentile(woken, 50) * 1000,
             "p99_ms": percentile(woken, 99) * 1000, "last_ms": woken[-1] * 1000, "produce_call_ms": call * 1000}
    for kind in ("loop", "threads", "client", "mariadb"):
        split[f"{kind}_cpu_ms"] = after[kind][0] - before.get(kind, (0.0, 0.0))[0]
    split["loop_queued_ms"] = after["loop"][1] - before["loop"][1]
    return split


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--consumers", type=int, default=1000)
    parser.add_argument("--bursts", type=int, default=5)
    parser.add_argument("--serving", default="uvicorn1")
    args = parser.parse_args(argv)
    broker = BenchBroker("burstsplit", serving=args.serving)
    broker.setup()
    broker.start()
    splits = []
    try:
        load.ensure_topic(broker, TOPIC)
        load.put_history(broker, TOPIC)  # as the long-poll figure does
        for _ in range(args.bursts):
            splits.append(split := burst(broker, args.consumers))
            print("  ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}" for k, v in split.items()),
                  flush=True)
    finally:
        broker.teardown()
    return splits


if __name__ == "__main__":
    main()
