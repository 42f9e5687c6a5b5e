"""What one request costs the broker: `python -m bench.request_cost [--requests 300] [--rounds 2]`.

One client, one keep-alive connection (http.client, so the client adds little), one broker
process (runbroker, 1 worker), requests back to back: wall time per request (median) and the
broker's CPU per request (from /proc). For `GET /healthz`, a 1-message produce, an empty pull
(wait 0) and a pull of 1 held message followed by its ack, with the fast path (`mqcenter/fastpath.py`) and without it
(`MQ_FAST_PATH=0`, the same three through Django), alternating `--rounds` times. Not part of
`bench all`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from bench import load
from bench.common import BenchBroker, Serving, cpu_seconds

SERVINGS = {
    "fast path": Serving("runbroker (uvicorn, 1 worker)", "runbroker", 1),
    "Django": Serving("runbroker (uvicorn, 1 worker), MQ_FAST_PATH=0", "runbroker", 1, env=(("MQ_FAST_PATH", "0"),)),
}


def measure(serving: Serving, requests: int) -> dict[str, tuple[float, float]]:
    """{request: (wall ms p50, broker CPU ms per request)}"""
    broker = BenchBroker("bench_reqcost")
    broker.serving = serving
    broker.setup()
    broker.start()
    try:
        load.ensure_topic(broker, "reqcost")
        conn, headers = connect(broker)
        for _ in range((requests + 20) // 100 + 1):  # messages for the pull + ack case
            send(conn, headers, "POST", "/api/v1/messages", {"messages": [{"topic": "reqcost", "data": 0}] * 100})

        def pull_and_ack() -> float:
            took, answer = send(conn, headers, "POST", "/api/v1/pull",
                                 {"topic": "reqcost", "consumer": "c", "max_messages": 1})
            [message] = answer["messages"]
            acked, _ = send(conn, headers, "POST", "/api/v1/ack",
                             {"consumer": "c", "results": [{"id": message["id"], "status": "SUCCESS"}]})
            return took + acked

        cases: dict[str, Callable[[], float]] = {
            "GET /healthz": lambda: send(conn, headers, "GET", "/healthz", None)[0],
            "produce 1 message": lambda: send(conn, headers, "POST", "/api/v1/messages",
                                               {"messages": [{"topic": "reqcost", "group": "other", "data": 1}]})[0],
            "pull, nothing there": lambda: send(conn, headers, "POST", "/api/v1/pull",
                                                 {"topic": "reqcost", "group": "nobody", "consumer": "c"})[0],
            "pull 1 + ack 1": pull_and_ack,
        }
        pids = broker.pids()
        figures = {}
        for name, case in cases.items():
            for _ in range(10):  # warm: connections, caches
                case()
            cpu = cpu_seconds(pids)
            walls = [case() for _ in range(requests)]
            figures[name] = (statistics.median(walls) * 1000, (cpu_seconds(pids) - cpu) / requests * 1000)
        conn.close()
        return figures
    finally:
        broker.teardown()


def connect(broker: BenchBroker) -> tuple[http.client.HTTPConnection, dict[str, str]]:
    """One keep-alive connection to `broker`, and the headers of a JSON API call."""
    host, port = broker.url.split("//")[1].split(":")
    return http.client.HTTPConnection(host, int(port)), {**broker.headers(), "Content-Type": "application/json"}


def send(conn: http.client.HTTPConnection, headers: dict[str, str], method: str, path: str,
          body: Any) -> tuple[float, Any]:
    began = time.perf_counter()
    conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
    answer = conn.getresponse()
    content = answer.read()
    elapsed = time.perf_counter() - began
    if answer.status >= 300:
        raise RuntimeError(f"{method} {path}: {answer.status} {content[:200]!r}")
    return elapsed, json.loads(content)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    runs: dict[str, list[dict[str, tuple[float, float]]]] = {name: [] for name in SERVINGS}
    for _ in range(args.rounds):
        for name, serving in SERVINGS.items():
            runs[name].append(measure(serving, args.requests))
    print(f"{'request':24} " + "  ".join(f"{name + ': wall p50, CPU':>28}" for name in SERVINGS))
    for case in runs["fast path"][0]:
        cells = []
        for name in SERVINGS:
            wall = statistics.median(r[case][0] for r in runs[name])
            cpu = statistics.median(r[case][1] for r in runs[name])
            cells.append(f"{wall:9.2f} ms, {cpu:6.2f} ms CPU")
        print(f"{case:24} " + "  ".join(f"{c:>28}" for c in cells))
    print(f"(medians of {args.rounds} alternating rounds of {args.requests} requests each)")


if __name__ == "__main__":
    main()
