"""The soak: producers and SDK consumers at half the measured maximum throughput.

The maximum is measured first, with producers and consumers together as the soak runs them,
in two steps of CAPACITY_SECONDS each. First the paced producers offer the end-to-end drain
maximum (this run's `mq_e2e` median, or OFFERED_DEFAULT when the figure runs alone) while the
4 SDK consumer processes handle what they can; then they offer what was handled. Producing
faster than the consumers keep up costs CPU the consumers lack, so the first step
underrates the maximum; the second step's handled rate (after its first window) is the
maximum. (Half the drain maximum alone would leave the producers' own work out: on 2 cores
that rate is ~60% of what both together carry, not half.)
`--soak-rate R` skips the measurement.

Then the soak: a paced producer (4 threads, every 100 ms a batch of what the schedule owes)
and 4 SDK consumer processes run for `seconds`; every 10-second window records throughput,
produce→handler latency p50/p99, produce-call p99, error responses and broker RSS, and what
the machine did meanwhile (`_Machine`: load average, CPU busy and iowait, InnoDB's redo
written and checkpoint age, dirty pages), so that a window whose p99 jumps can be told
apart from a machine that got busier. Pass:
memory flat (last window within max(20 MB, 10%) of the first after warm-up), p99 stable (no
window above 3x the median window), zero error responses.
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

import httpx

from bench import load
from bench.common import (
    KEY_ID,
    ROOT,
    BenchBroker,
    Results,
    Scale,
    machine_load,
    mysql_connect,
    percentile,
    redis_client,
)

WINDOW = 10.0
SDK_LOG = ROOT / "var" / "bench-sdk-consumers.log"
PRODUCERS = 4
CAPACITY_SECONDS = 30.0
OFFERED_DEFAULT = 6000.0


def soak(scale: Scale, results: Results, seconds: float | None = None, rate: float | None = None) -> dict[str, Any]:
    seconds = seconds or scale.soak_seconds
    broker = BenchBroker("bench_soak")
    broker.setup()
    broker.start()
    capacity: dict[str, Any] | None = None
    try:
        if rate is None:
            offered = results.data.get("figures", {}).get("mq_e2e", {}).get("median") or OFFERED_DEFAULT
            capacity = _capacity(broker, offered, min(CAPACITY_SECONDS, max(2 * WINDOW, seconds / 4)))
            rate = capacity["handled_per_s"] / 2
        run = _paced_load(broker, "soak", rate, seconds, "soak")
    finally:
        broker.teardown()
    errors = run.pop("errors")
    figure = {"seconds": seconds, "target_rate": rate, "capacity": capacity, **run,
              "error_responses": len(errors), "error_samples": errors[:5], **_verdict(run["windows"], errors)}
    results.put("soak", figure)
    return figure


def _capacity(broker: BenchBroker, offered: float, seconds: float) -> dict[str, Any]:
    """The most the consumers handle while producers run: offer `offered`, then what that
    handled (each step on its own topic, so the backlog one leaves does not slow the next)."""
    steps = []
    for step in (1, 2):
        run = _paced_load(broker, f"soakmax{step}", offered, seconds, f"capacity {step}")
        steady = run["windows"][1:] or run["windows"]
        handled = statistics.median(w["handled_per_s"] for w in steady)
        steps.append({"offered_rate": offered, "handled_per_s": handled, "windows": run["windows"],
                      "error_responses": len(run["errors"])})
        offered = handled
    return {"offered_rate": steps[-1]["offered_rate"], "handled_per_s": steps[-1]["handled_per_s"],
            "seconds": seconds, "steps": steps}


def _paced_load(broker: BenchBroker, topic: str, rate: float, seconds: float, label: str) -> dict[str, Any]:
    """Producers paced at `rate` and 4 SDK consumer processes on `topic` for `seconds`,
    measured in WINDOW-second windows."""
    key = f"bench:{KEY_ID}latency:{topic}"
    client = redis_client()
    client.delete(key)
    windows: list[dict[str, Any]] = []
    errors: list[str] = []
    call_times: list[tuple[float, float]] = []  # (at, seconds)
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
                time.sleep(0.1)

    log_offset = _log_size()
    machine = _Machine()
    producers = [threading.Thread(target=produce, args=(i,)) for i in range(PRODUCERS)]
    try:
        load.ensure_topic(broker, topic)
        with load.SdkConsumers(broker, topic, 4, mode="latency", concurrency=4, prefetch=96):
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
                    **machine.since_last(),
                })
                print(f"  {label} {windows[-1]}", flush=True)
            stop.set()
            for thread in producers:
                thread.join()
    finally:
        stop.set()
        machine.close()
    return {"windows": windows, "errors": errors, "consumer_log_errors": _consumer_errors(log_offset)}


class _Machine:
    """What the machine and MariaDB did since the last look (one `SHOW GLOBAL STATUS`)."""

    STATUS = ("Innodb_os_log_written", "Innodb_checkpoint_age", "Innodb_buffer_pool_pages_dirty")

    def __init__(self) -> None:
        self.conn = mysql_connect()
        self.last = self._read()

    def _read(self) -> dict[str, float]:
        cur = self.conn.cursor()
        cur.execute("SHOW GLOBAL STATUS WHERE Variable_name IN %s", (self.STATUS,))
        values: dict[str, float] = {name: float(value) for name, value in cur.fetchall()}
        with open("/proc/stat") as stat:
            ticks = [float(t) for t in stat.readline().split()[1:]]
        values.update({"cpu_total": sum(ticks), "cpu_idle": ticks[3], "cpu_iowait": ticks[4],
                       "at": time.monotonic()})
        return values

    def since_last(self) -> dict[str, float]:
        now = self._read()
        last, self.last = self.last, now
        ticks = (now["cpu_total"] - last["cpu_total"]) or 1.0
        return {
            "load_1m": round(machine_load(), 2),
            "cpu_busy_pct": round(100 * (1 - (now["cpu_idle"] - last["cpu_idle"] + now["cpu_iowait"]
                                                  - last["cpu_iowait"]) / ticks), 1),
            "iowait_pct": round(100 * (now["cpu_iowait"] - last["cpu_iowait"]) / ticks, 1),
            "redo_mb_per_s": round((now.get("Innodb_os_log_written", 0) - last.get("Innodb_os_log_written", 0))
                                   / 2**20 / (now["at"] - last["at"]), 2),
            "checkpoint_age_mb": round(now.get("Innodb_checkpoint_age", 0) / 2**20, 1),
            "dirty_pages": int(now.get("Innodb_buffer_pool_pages_dirty", 0)),
        }

    def close(self) -> None:
        self.conn.close()


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
