"""Issue 8's soak: producers and SDK consumers at half the measured maximum throughput.

A paced producer (4 threads, every 100 ms a batch of what the schedule owes) and 4 SDK consumer processes run
for `seconds`; every 10-second window records throughput, produce→handler latency p50/p99,
produce-call p99, error responses and broker RSS. Pass: memory flat (last window within
max(20 MB, 10%) of the first after warm-up), p99 stable (no window above 3x the median
window), zero error responses.
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

import httpx

from bench import load
from bench.common import ROOT, BenchBroker, Results, Scale, percentile, redis_client

WINDOW = 10.0
SDK_LOG = ROOT / "var" / "bench-sdk-consumers.log"
PRODUCERS = 4


def soak(scale: Scale, results: Results, seconds: float | None = None, rate: float | None = None) -> dict[str, Any]:
    seconds = seconds or scale.soak_seconds
    if rate is None:
        measured = results.data.get("figures", {}).get("mq_e2e", {}).get("median")
        rate = measured / 2 if measured else 500.0
    broker = BenchBroker("bench_soak")
    broker.setup()
    broker.start()
    topic = "soak"
    key = f"bench:latency:{topic}"
    client = redis_client()
    client.delete(key)
    windows: list[dict[str, Any]] = []
    errors: list[str] = []
    call_times: list[tuple[float, float]] = []  # (at, seconds)
    sent = [0]
    lock = threading.Lock()
    stop = threading.Event()

    def produce(i: int) -> None:
        """Keep to the schedule: each call sends what is owed since the start (at most 500),
        so slow answers make bigger batches rather than a lower rate."""
        per_second = rate / PRODUCERS
        mine = 0
        with httpx.Client(base_url=broker.url, headers=broker.headers(), timeout=30) as http:
            start = time.monotonic()
            while not stop.is_set():
                n = min(500, int(per_second * (time.monotonic() - start)) - mine)
                if n > 0:
                    t0 = time.time()
                    body = {"messages": [{"topic": topic, "data": {"t0": t0, "pad": "x" * 160}} for _ in range(n)]}
                    try:
                        answer = http.post("/api/v1/messages", json=body)
                        if answer.status_code != 201:
                            errors.append(f"produce {answer.status_code}: {answer.text[:120]}")
                    except httpx.HTTPError as exc:
                        errors.append(f"produce {exc!r}")
                    mine += n
                    with lock:
                        call_times.append((time.time(), time.time() - t0))
                        sent[0] += n
                time.sleep(0.1)

    log_offset = _log_size()
    try:
        load.ensure_topic(broker, topic)
        with load.SdkConsumers(broker, topic, 4, mode="latency", concurrency=4, prefetch=96):
            producers = [threading.Thread(target=produce, args=(i,)) for i in range(PRODUCERS)]
            for thread in producers:
                thread.start()
            began = time.time()
            seen = 0
            while time.time() - began < seconds:
                time.sleep(WINDOW)
                latencies = [float(v) for v in client.lrange(key, seen, -1)]
                seen += len(latencies)
                now = time.time()
                with lock:
                    calls = [s for at, s in call_times if at > now - WINDOW]
                windows.append({
                    "t": round(now - began, 1),
                    "handled_per_s": len(latencies) / WINDOW,
                    "p50_ms": percentile(latencies, 50) * 1000 if latencies else None,
                    "p99_ms": percentile(latencies, 99) * 1000 if latencies else None,
                    "produce_call_p99_ms": percentile(calls, 99) * 1000 if calls else None,
                    "rss_mb": broker.rss_mb(),
                    "errors": len(errors),
                })
                print(f"  soak {windows[-1]}", flush=True)
            stop.set()
            for thread in producers:
                thread.join()
        consumer_errors = _consumer_errors(log_offset)
    finally:
        stop.set()
        broker.teardown()
    figure = {"seconds": seconds, "target_rate": rate, "windows": windows, "error_responses": len(errors),
              "error_samples": errors[:5], "consumer_log_errors": consumer_errors, **_verdict(windows, errors)}
    results.put("soak", figure)
    return figure


def _log_size() -> int:
    return SDK_LOG.stat().st_size if SDK_LOG.exists() else 0


def _consumer_errors(offset: int) -> int:
    """ERROR lines the SDK consumers logged during this soak."""
    if not SDK_LOG.exists():
        return 0
    with SDK_LOG.open("rb") as log:
        log.seek(offset)
        text = log.read().decode(errors="replace")
    return sum(1 for line in text.splitlines() if "ERROR" in line)


def _verdict(windows: list[dict[str, Any]], errors: list[str]) -> dict[str, Any]:
    steady = windows[1:] if len(windows) > 2 else windows
    if not steady:
        return {"memory_flat": False, "p99_stable": False, "zero_errors": not errors}
    rss = [w["rss_mb"] for w in steady]
    p99 = [w["p99_ms"] for w in steady if w["p99_ms"] is not None]
    growth = rss[-1] - rss[0]
    median_p99 = statistics.median(p99) if p99 else float("nan")
    return {
        "rss_growth_mb": growth,
        "memory_flat": growth <= max(20.0, 0.1 * rss[0]),
        "p99_median_ms": median_p99,
        "p99_worst_ms": max(p99) if p99 else None,
        "p99_stable": bool(p99) and max(p99) <= 3 * median_p99,
        "zero_errors": not errors,
    }
