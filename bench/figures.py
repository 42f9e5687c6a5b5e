"""The figures of `python -m bench`: each runs `scale.repeats` times and stores median / min / max."""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

import httpx

from bench import backlog, dblimit, load, peers
from bench.common import (
    PYTHON,
    ROOT,
    BenchBroker,
    Results,
    Scale,
    cpu_seconds,
    mysql_connect,
    percentile,
    summary,
)


def _log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def _started(name: str, serving: str | None = None) -> BenchBroker:
    broker = BenchBroker(name, **({"serving": serving} if serving else {}))
    broker.setup()
    broker.start()
    return broker


def _cpu_summary(runs: list[dict[str, float]]) -> dict[str, Any]:
    """Each part's CPU µs per message over a figure's runs (`CpuMeter` splits, one per run)."""
    return {part: summary(run[part] for run in runs) for part in runs[0]}


def _lat(samples: list[float]) -> dict[str, float]:
    return {"p50_ms": percentile(samples, 50) * 1000, "p99_ms": percentile(samples, 99) * 1000,
            "max_ms": max(samples) * 1000, "samples": len(samples)}


# --- baselines ---------------------------------------------------------------------------

def baselines(scale: Scale, results: Results) -> None:
    database_limit(scale, results)
    peers_figure(scale, results)


def database_limit(scale: Scale, results: Results) -> None:
    _log("database limit")
    database = dblimit.scratch_database()
    # A produce writes no trace rows (a message's "produced" event is its row): the insert is
    # its whole durable work, so it has no "with traces" variant.
    cpu: list[dict[str, float]] = [{} for _ in range(scale.repeats)]
    rates = [dblimit.insert_rate(database, scale.produce_messages, cpu=split) for split in cpu]
    results.put("dblimit_insert", {"unit": "msg/s", **summary(rates), "cpu_us_per_message": _cpu_summary(cpu)})
    for traces in (False, True):
        suffix = "_with_traces" if traces else ""
        cpu = [{} for _ in range(scale.repeats)]
        rates = [dblimit.claim_ack_rate(database, scale.e2e_messages, traces=traces, cpu=split) for split in cpu]
        results.put(f"dblimit_claim_ack{suffix}", {"unit": "msg/s", **summary(rates),
                                                   "cpu_us_per_message": _cpu_summary(cpu)})
    BenchBroker("bench_limit").teardown()


def peers_figure(scale: Scale, results: Results) -> None:
    for name, run in (("celery", peers.celery_e2e), ("rabbitmq", peers.rabbit_e2e),
                      ("djangoq", peers.djangoq_e2e)):
        _log(f"peer {name}")
        if name == "djangoq":
            peers.djangoq_setup()
        count = scale.djangoq_messages if name == "djangoq" else scale.peer_messages
        pairs = [run(f"{name}{i}{int(time.time())}", count) for i in range(scale.repeats)]
        results.put(f"{name}_enqueue", {"unit": "msg/s", **summary(p[0] for p in pairs)})
        results.put(f"{name}_e2e", {"unit": "msg/s", "messages": count, **summary(p[1] for p in pairs)})

    _log("peer celery latency")
    runs = [_lat(peers.celery_latency(scale.latency_samples)) for _ in range(scale.repeats)]
    results.put("celery_latency", {"unit": "ms", "p50": summary(r["p50_ms"] for r in runs),
                                   "p99": summary(r["p99_ms"] for r in runs)})


# --- MQ Center ---------------------------------------------------------------------------

def produce(scale: Scale, results: Results) -> None:
    broker = _started("bench")
    try:
        load.ensure_topic(broker, "bench")
        rates, cpu = [], []
        for _ in range(scale.repeats):
            broker.truncate()
            cpu.append({})
            rates.append(load.produce_rate(broker, "bench", scale.produce_messages, cpu=cpu[-1]))
        results.put("mq_produce", {"unit": "msg/s", "serving": broker.serving.label,
                                   "messages": scale.produce_messages, **summary(rates),
                                   "cpu_us_per_message": _cpu_summary(cpu)})
        results.put("mq_rss_after_produce", {"unit": "MB", "value": broker.rss_mb()})
    finally:
        broker.teardown()


def e2e(scale: Scale, results: Results) -> None:
    broker = _started("bench")
    try:
        load.ensure_topic(broker, "bench")
        rates, http_rates, cpu = [], [], []
        for i in range(scale.repeats):
            broker.truncate()
            _log(f"SDK end-to-end run {i + 1}")
            cpu.append({})
            rates.append(load.sdk_e2e_rate(broker, "bench", scale.e2e_messages, cpu=cpu[-1]))
        for _ in range(scale.repeats):
            broker.truncate()
            http_rates.append(load.pull_ack_rate(broker, "bench", scale.serving_messages))
        results.put("mq_e2e", {"unit": "msg/s", "serving": broker.serving.label,
                               "messages": scale.e2e_messages, **summary(rates),
                               "cpu_us_per_message": _cpu_summary(cpu)})
        results.put("mq_http_pull_ack", {"unit": "msg/s", "messages": scale.serving_messages, **summary(http_rates)})
        results.put("mq_rss_after_e2e", {"unit": "MB", "value": broker.rss_mb()})
    finally:
        broker.teardown()


def latency(scale: Scale, results: Results) -> None:
    broker = _started("bench")
    try:
        runs, idle = [], []
        for i in range(scale.repeats):
            broker.truncate()
            runs.append(_lat(load.sdk_latency(broker, f"lat{i}", scale.latency_samples)))
            # The same statements' cost to an idle client, beside the figure: each of its samples
            # comes 20 ms after the last, and waking the database and the disk is part of it.
            idle.append(dblimit.idle_round_trips(broker.database, scale.latency_samples))
        results.put("mq_latency", {"unit": "ms", "serving": broker.serving.label,
                                   "p50": summary(r["p50_ms"] for r in runs),
                                   "p99": summary(r["p99_ms"] for r in runs), "runs": runs,
                                   "idle_db": {name: summary(r[name] for r in idle) for name in idle[0]}})
    finally:
        broker.teardown()


def _pull_ack_runs(broker: BenchBroker, samples: int) -> dict[str, float]:
    backlog.take_due(broker.database)
    run = _lat(load.pull_ack_latency(broker, backlog.TOPIC, samples))
    backlog.take_due(broker.database)
    return run


def _p50_p99(runs: list[dict[str, float]]) -> dict[str, Any]:
    return {"p50": summary(r["p50_ms"] for r in runs), "p99": summary(r["p99_ms"] for r in runs)}


def big_database(scale: Scale) -> BenchBroker:
    """The broker on the big table (10M finished + 1M delayed at full scale), generated once
    and kept between runs (`mq_e2e_bench_big_<scale>`)."""
    broker = BenchBroker(f"bench_big_{scale.name}")
    have = {}
    try:
        have = backlog.counts(broker.database)
    except Exception:  # noqa: BLE001 - no such database yet
        broker.setup()
    finished = sum(n for s, n in have.items() if s in ("SUCCESS", "FAIL", "TIMEOUT"))
    if finished < scale.backlog_finished or have.get("NEW", 0) < scale.backlog_delayed:
        _log(f"generating {scale.backlog_finished:,} finished + {scale.backlog_delayed:,} delayed rows")
        if not have:
            broker.manage("migrate", "-v0")
        backlog.grow_finished(broker.database, scale.backlog_finished, log=_log)
        backlog.add_delayed(broker.database, scale.backlog_delayed)
    broker.manage("migrate", "-v0")
    broker.token = broker.manage("createtoken", "--scope", "admin").strip()
    broker.start()
    return broker


def backlog_figure(scale: Scale, results: Results) -> None:
    """Both brokers run at once and their runs alternate (empty, big, empty, big, ...): the
    machine's drift over a few minutes moved either side by more than the 20% judged. And
    three times the usual runs: one broker's p50 varies ±12% from run to run (10 runs of 200
    samples on the empty table), so 3 runs a side would leave the ratio to chance."""
    samples = max(scale.latency_samples, 50)
    empty = _started("bench")
    big = None
    try:
        load.ensure_topic(empty, backlog.TOPIC)
        big = big_database(scale)
        rows = backlog.counts(big.database)
        load.ensure_topic(big, backlog.TOPIC)
        empty_runs, big_runs = [], []
        for _ in range(3 * scale.repeats):
            empty_runs.append(_pull_ack_runs(empty, samples))
            big_runs.append(_pull_ack_runs(big, samples))
    finally:
        empty.teardown()
        if big is not None:
            big.stop()
    empty_lat, big_lat = _p50_p99(empty_runs), _p50_p99(big_runs)
    results.put("mq_backlog", {"unit": "ms", "empty": empty_lat, "big": big_lat, "rows": rows,
                               "ratio_p50": big_lat["p50"]["median"] / empty_lat["p50"]["median"]})


def console(scale: Scale, results: Results) -> None:
    figure: dict[str, Any] = {"unit": "ms"}
    small = BenchBroker("bench_console")
    small.setup()
    backlog.grow_finished(small.database, scale.console_small, log=lambda s: None)
    small.start()
    big = None
    try:
        for label, broker in (("small", small), ("big", None)):
            if broker is None:
                small.teardown()
                broker = big = big_database(scale)
            figure[f"{label}_rows"] = sum(backlog.counts(broker.database).values())
            session = backlog.console_session(broker)
            api = httpx.Client(base_url=broker.url, headers=broker.headers(), timeout=60)
            pages = {
                "console_all": (session, "/messages/"),
                "console_status": (session, "/messages/?status=FAIL"),
                "api_all": (api, "/api/v1/messages"),
                "api_status": (api, "/api/v1/messages?status=FAIL"),
            }
            for name, (client, path) in pages.items():
                runs = [percentile(backlog.page_times(client, path, 10), 50) * 1000 for _ in range(scale.repeats)]
                figure[f"{label}_{name}"] = summary(runs)
    finally:
        small.teardown()
        if big is not None:
            big.stop()
    results.put("mq_console", figure)


def longpoll(scale: Scale, results: Results) -> None:
    """On the broker as served by default (every figure's serving: two processes, each with
    the pulls it accepted waiting on it), then the same burst on one process, reported as
    info: the difference is what waking pulls in another process costs."""
    runs, steady, single = [], [], []
    broker = _started("bench_lp")
    try:
        load.ensure_topic(broker, "lp")
        load.put_history(broker, "lp")
        for _ in range(scale.repeats):
            runs.append(_longpoll_once(broker, scale.longpoll_consumers))
        samples = min(STEADY_SAMPLES, scale.longpoll_consumers // 2)
        steady = [_longpoll_once(broker, scale.longpoll_consumers, steady=samples) for _ in range(scale.repeats)]
    finally:
        broker.teardown()
    one = _started("bench_lp1", serving="uvicorn1")
    try:
        load.ensure_topic(one, "lp")
        load.put_history(one, "lp")
        single = [_longpoll_once(one, scale.longpoll_consumers) for _ in range(scale.repeats)]
    finally:
        one.teardown()
    results.put("mq_longpoll", {
        "consumers": scale.longpoll_consumers, "serving": broker.serving.label,
        "served": summary(r["served"] for r in runs), "errors": summary(r["errors"] for r in runs),
        "wake_p50_ms": summary(r["wake_p50_ms"] for r in runs),
        "wake_p99_ms": summary(r["wake_p99_ms"] for r in runs),
        "rss_growth_mb": summary(r["rss_growth_mb"] for r in runs),
        "idle_broker_cpu_cores": summary(r["idle_broker_cpu_cores"] for r in runs),
        "idle_db_connects_per_s": summary(r["idle_db_connects_per_s"] for r in runs),
        "max_connections": _max_connections(),
        "error_samples": sorted({e for r in runs + steady + single for e in r["error_samples"]})[:5],
        # One message at a time (every 20 ms) while all the others keep waiting.
        "steady_samples": samples,
        "steady_served": summary(r["served"] for r in steady),
        "steady_errors": summary(r["errors"] for r in steady),
        "steady_wake_p50_ms": summary(r["wake_p50_ms"] for r in steady),
        "steady_wake_p99_ms": summary(r["wake_p99_ms"] for r in steady),
        "one_process": {
            "serving": one.serving.label,
            "served": summary(r["served"] for r in single), "errors": summary(r["errors"] for r in single),
            "wake_p50_ms": summary(r["wake_p50_ms"] for r in single),
            "wake_p99_ms": summary(r["wake_p99_ms"] for r in single),
        },
    })


def _max_connections() -> int:
    conn = mysql_connect()
    cur = conn.cursor()
    cur.execute("SELECT @@max_connections")
    value = int(cur.fetchone()[0])
    conn.close()
    return value


def _waiting(broker: BenchBroker) -> int:
    """Pulls waiting in all the broker's processes, as each reported at its last heartbeat
    (every second: MQ_LEASE_RECOVERY_SECONDS). A process's /metrics counts only its own."""
    conn = mysql_connect(broker.database)
    try:
        cur = conn.cursor()
        cur.execute("SELECT COALESCE(SUM(waiting_pulls), 0) FROM mq_registry_broker "
                    "WHERE last_heartbeat >= UTC_TIMESTAMP(6) - INTERVAL 3 SECOND")
        return int(cur.fetchone()[0])
    finally:
        conn.close()


def _db_connections_total() -> int:
    conn = mysql_connect()
    cur = conn.cursor()
    cur.execute("SHOW GLOBAL STATUS LIKE 'Connections'")
    value = int(cur.fetchone()[1])
    conn.close()
    return value


def _idle_cost(broker: BenchBroker, seconds: float) -> dict[str, float]:
    """What the waiting pulls cost while nothing happens: broker CPU (fraction of one core)
    and new database connections per second (server-wide, so other clients add noise)."""
    pids = broker.pids()
    cpu0, conn0, began = cpu_seconds(pids), _db_connections_total(), time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - began
    return {"idle_broker_cpu_cores": (cpu_seconds(pids) - cpu0) / elapsed,
            "idle_db_connects_per_s": (_db_connections_total() - conn0) / elapsed}


STEADY_SAMPLES = 200


def waiting_pulls(broker: BenchBroker, topic: str, count: int) -> tuple[subprocess.Popen[str], int]:
    """Start the long-poll client's `count` pulls on `topic` and wait (up to 12 s) until the
    broker's processes have them all waiting. Returns the client (its last stdout line will be
    the answers, as JSON) and the count last seen."""
    client = subprocess.Popen(
        [PYTHON, "-m", "bench.workloads.longpoll_client", broker.url, broker.token, topic, str(count)],
        cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert client.stdout is not None
    if client.stdout.readline().strip() != "ready":
        raise RuntimeError("the long-poll client did not start")
    deadline = time.monotonic() + 12
    waiting = _waiting(broker)
    while waiting < count and time.monotonic() < deadline:
        time.sleep(0.2)
        waiting = _waiting(broker)
    return client, waiting


def _longpoll_once(broker: BenchBroker, count: int, steady: int = 0) -> dict[str, Any]:
    """`count` pulls wait; then either one produce of `count` messages (the burst: every
    waiter is woken at once) or, with `steady`, that many single messages 20 ms apart while
    the rest keep waiting (then one produce releases them, unmeasured). Wake latency is the
    produce call's start to the pull's answer."""
    rss_before = broker.rss_mb()
    client, waiting = waiting_pulls(broker, "lp", count)
    rss_peak = broker.rss_mb()
    idle = _idle_cost(broker, 3.0)
    produce_error = ""
    with httpx.Client(base_url=broker.url, headers=broker.headers(), timeout=60) as http:
        def send(messages: list[Any]) -> None:
            nonlocal produce_error
            try:
                http.post("/api/v1/messages", json={"messages": [{"topic": "lp", "data": d} for d in messages]}
                          ).raise_for_status()
            except httpx.HTTPError as exc:  # a saturated broker is a result, not a crash
                produce_error = f"produce while {count} pulls waited: {exc!r}"

        for _ in range(steady):
            send([{"t0": time.time()}])
            time.sleep(0.02)
        # The clock starts here, not before the client is built: building an httpx client
        # (its TLS context) takes ~47 ms here, which is no part of a produce call.
        began = time.time()
        for start in range(steady, count, 1000):
            send([{"t0": began} if not steady else None] * min(1000, count - start))
    out, _ = client.communicate(timeout=120)
    answers = json.loads(out.strip().splitlines()[-1])
    rss_after = broker.rss_mb()
    woken = [a["at"] - a["data"]["t0"] for a in answers
             if a["status"] == 200 and a["messages"] and isinstance(a["data"], dict)]
    errors = [a for a in answers if a["status"] != 200]
    return {
        "waiting_seen": waiting, "served": len(woken), "errors": len(errors) + bool(produce_error), **idle,
        "error_samples": [produce_error] * bool(produce_error) + [str(a["error"])[:120] for a in errors[:3]],
        "wake_p50_ms": percentile(woken, 50) * 1000 if woken else float("nan"),
        "wake_p99_ms": percentile(woken, 99) * 1000 if woken else float("nan"),
        "rss_growth_mb": max(rss_peak, rss_after) - rss_before,
    }
