"""The results file → a Markdown table with the targets judged, and PNG charts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.common import RESULTS_DIR, cpu_split
from bench.postgres import postgres_rows


def _fmt(fig: dict[str, Any] | None, digits: int = 0) -> str:
    if not fig:
        return "—"
    return f"{fig['median']:,.{digits}f} ({fig['min']:,.{digits}f}-{fig['max']:,.{digits}f})"


def _soak_basis(soak: dict[str, Any]) -> str:
    """Where the soak's rate came from: half the measured maximum, or set by hand."""
    capacity = soak.get("capacity")
    if not capacity:
        return "rate set by --soak-rate"
    return (f"maximum with producers and consumers {capacity['handled_per_s']:,.0f} msg/s handled while "
            f"{capacity['offered_rate']:,.0f} were offered; rate = half")


def _verdict(ok: bool | None) -> str:
    return "—" if ok is None else ("**met**" if ok else "**missed**")


def _ratio(a: dict[str, Any] | None, b: dict[str, Any] | None) -> float | None:
    return a["median"] / b["median"] if a and b and b["median"] else None


def _fanout_rows(f: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """Publishes to 1, 2 and 4 subscribed groups (target: N groups cost at most N times one,
    i.e. rows/s at least the single group's), and end-to-end per copy with 2 groups."""
    rows: list[tuple[str, str, str, str, str]] = []
    fan = f.get("mq_fanout_produce")
    if fan:
        one = fan["groups"]["1"]["rows_per_s"]
        for n in ("1", "2", "4"):
            g = fan["groups"].get(n)
            if g is None:
                continue
            r = _ratio(g["rows_per_s"], one)
            rows.append((f"publish to {n} group{'s' if n != '1' else ''}, publishes/s (rows/s)",
                         f"{_fmt(g['publishes_per_s'])} ({_fmt(g['rows_per_s'])})",
                         "rows/s vs 1 group: " + (f"{r:.2f}" if r else "—"),
                         "rows/s ≥ 1 group's", _verdict(r >= 1.0 if r else None)))
    e2e, db = f.get("mq_fanout_e2e"), f.get("dblimit_claim_ack")
    if e2e:
        r = _ratio(e2e, db)
        rows.append(("end-to-end with 2 groups, copies/s", _fmt(e2e),
                     f"DB limit claim+ack {_fmt(db)}; ratio " + (f"{r:.2f}" if r else "—"),
                     "≥ 0.5 x DB limit", _verdict(r >= 0.5 if r else None)))
    return rows


def _cpu_rows(figure: dict[str, Any] | None, limit: dict[str, Any] | None,
              limit_name: str = "DB limit") -> list[tuple[str, str, str, str, str]]:
    """Where a throughput figure's CPU went, and its database limit's, when they measured
    that. Side by side they show what the broker adds: the database's part of a figure
    against the same statements' cost without a broker."""
    split, baseline = cpu_split(figure, _fmt), cpu_split(limit, _fmt, ", ")
    if not split and not baseline:
        return []
    return [("  where the CPU goes, µs per message", split or "—",
             (f"{limit_name}: {baseline}; " if baseline else "") + "2 cores = 2,000,000 µs/s", "info", "")]


def table(data: dict[str, Any]) -> str:
    f = data.get("figures", {})
    rows: list[tuple[str, str, str, str, str]] = []  # figure, MQ Center, baseline, target, verdict

    mq, db = f.get("mq_produce"), f.get("dblimit_insert")
    r = _ratio(mq, db)
    rows.append(("produce throughput, msg/s", _fmt(mq), f"DB limit insert {_fmt(db)}; ratio "
                 + (f"{r:.2f}" if r else "—"), "≥ 0.5 x DB limit", _verdict(r >= 0.5 if r else None)))
    dbt = f.get("dblimit_insert_with_traces")
    if dbt:
        rows.append(("  (same work incl. trace rows)", "", f"DB limit insert + traces {_fmt(dbt)}; ratio "
                     f"{_ratio(mq, dbt) or 0:.2f}", "info", ""))
    rows += _cpu_rows(mq, db)

    mq, db = f.get("mq_e2e"), f.get("dblimit_claim_ack")
    r = _ratio(mq, db)
    rows.append(("end-to-end throughput, msg/s (4 SDK processes)", _fmt(mq),
                 f"DB limit claim+ack {_fmt(db)}; ratio " + (f"{r:.2f}" if r else "—"),
                 "≥ 0.5 x DB limit", _verdict(r >= 0.5 if r else None)))
    dbt = f.get("dblimit_claim_ack_with_traces")
    if dbt:
        rows.append(("  (same work incl. trace rows)", "", f"DB limit claim+ack + traces {_fmt(dbt)}; "
                     f"ratio {_ratio(mq, dbt) or 0:.2f}", "info", ""))
    for peer, name in (("celery", "Celery on Redis (c=2)"), ("djangoq", "django-q2 ORM (2 workers)"),
                       ("rabbitmq", "RabbitMQ + pika (4 consumers)")):
        p = f.get(f"{peer}_e2e")
        r = _ratio(mq, p)
        rows.append((f"  vs {name}", "", f"{_fmt(p)}; ratio " + (f"{r:.2f}" if r else "—"),
                     "above the peer", _verdict(r > 1 if r else None)))
    http = f.get("mq_http_pull_ack")
    if http:
        rows.append(("  HTTP pull 100 + ack 100, 4 threads (no SDK)", _fmt(http), "", "info", ""))
    # beside the limit that also does the broker's trace work, when it was measured
    rows += _cpu_rows(mq, dbt or db, "DB limit + traces" if dbt else "DB limit")

    rows += postgres_rows(f, _fmt, _ratio, _verdict)
    rows += _fanout_rows(f)

    lat, cel = f.get("mq_latency"), f.get("celery_latency")
    if lat:
        p50, p99 = lat["p50"], lat["p99"]
        rows.append(("delivery latency p50, ms", _fmt(p50, 1), f"Celery p50 {_fmt(cel['p50'], 1) if cel else '—'}",
                     "≤ 10 ms and < Celery p50", _verdict(p50["median"] <= 10 and (cel is None or p50["median"] < cel["p50"]["median"]))))
        rows.append(("delivery latency p99, ms", _fmt(p99, 1), f"Celery p99 {_fmt(cel['p99'], 1) if cel else '—'}",
                     "≤ 50 ms", _verdict(p99["median"] <= 50)))
        if "idle_db" in lat:
            idle = lat["idle_db"]
            rows.append(("  one statement 20 ms after the last (plain mysqlclient), ms",
                         f"one-row INSERT, committed {_fmt(idle['insert_commit_p50_ms'], 2)}; "
                         f"SELECT 1 {_fmt(idle['select_p50_ms'], 2)}", "", "info", ""))

    bl = f.get("mq_backlog")
    if bl:
        rows_in = sum(bl["rows"].values())
        rows.append(("backlog independence: pull+ack p50, ms", f"{_fmt(bl['big']['p50'], 2)} with {rows_in:,} rows",
                     f"empty table {_fmt(bl['empty']['p50'], 2)}; ratio {bl['ratio_p50']:.2f}", "ratio ≤ 1.2",
                     _verdict(bl["ratio_p50"] <= 1.2)))

    for key in sorted(k for k in f if k.startswith("failed_")):
        rows.append((f"{key[len('failed_'):]} figure FAILED", f"{f[key].get('error', '')[:160]}", "",
                     "", f"**failed** (load {f[key].get('load_avg_1m')})"))

    lp = f.get("mq_longpoll")
    if lp:
        n = lp["consumers"]
        ok = lp["served"]["min"] >= n and lp["errors"]["max"] == 0 and lp["wake_p99_ms"]["median"] <= 100 \
            and lp["rss_growth_mb"]["median"] <= 200
        rows.append((f"long-poll capacity ({n:,} waiting, {n:,} messages in one produce)", f"served {_fmt(lp['served'])}, errors {_fmt(lp['errors'])}; "
                     f"wake p99 {_fmt(lp['wake_p99_ms'], 1)} ms; RSS +{_fmt(lp['rss_growth_mb'], 1)} MB",
                     "", "all served, p99 ≤ 100 ms, ≤ 200 MB", _verdict(ok)))
        if "steady_wake_p99_ms" in lp:
            ok = lp["steady_served"]["min"] >= lp["steady_samples"] and lp["steady_errors"]["max"] == 0 \
                and lp["steady_wake_p99_ms"]["median"] <= 100
            rows.append((f"  one message every 20 ms while {n:,} wait", f"served {_fmt(lp['steady_served'])} of "
                         f"{lp['steady_samples']}; wake p50 {_fmt(lp['steady_wake_p50_ms'], 1)} ms, "
                         f"p99 {_fmt(lp['steady_wake_p99_ms'], 1)} ms", "", "p99 ≤ 100 ms", _verdict(ok)))
        if "one_process" in lp:
            one = lp["one_process"]
            rows.append(("  the same burst on one broker process", f"served {_fmt(one['served'])}, errors "
                         f"{_fmt(one['errors'])}; wake p50 {_fmt(one['wake_p50_ms'], 1)} ms, "
                         f"p99 {_fmt(one['wake_p99_ms'], 1)} ms", "", "info", ""))
        if "idle_broker_cpu_cores" in lp:
            rows.append(("  cost of the idle waiters", f"broker CPU {_fmt(lp['idle_broker_cpu_cores'], 2)} cores; "
                         f"{_fmt(lp['idle_db_connects_per_s'])} new DB connections/s "
                         f"(max_connections {lp.get('max_connections')})", "", "info", ""))

    co = f.get("mq_console")
    if co:
        for size in ("small", "big"):
            for page, what in (("console_all", "console /messages/"), ("console_status", "console ?status=FAIL"),
                               ("api_all", "API GET /messages"), ("api_status", "API ?status=FAIL")):
                fig = co.get(f"{size}_{page}")
                if fig:
                    rows.append((f"{what}, {co[f'{size}_rows']:,} rows, ms", _fmt(fig, 1), "", "≤ 300 ms",
                                 _verdict(fig["median"] <= 300)))

    for key, what in (("mq_rss_after_produce", "broker RSS after produce runs"),
                      ("mq_rss_after_e2e", "broker RSS after end-to-end runs")):
        if key in f:
            rows.append((what, f"{f[key]['value']:.0f} MB", "", "reported", ""))

    soak = f.get("soak")
    if soak:
        rows.append((f"soak {soak['seconds']:.0f} s at {soak['target_rate']:.0f} msg/s",
                     f"RSS growth {soak.get('rss_growth_mb', 0):.1f} MB; p99 median {soak.get('p99_median_ms') or 0:.1f} ms, "
                     f"worst {soak.get('p99_worst_ms') or 0:.1f} ms; errors {soak['error_responses']}",
                     _soak_basis(soak), "flat memory, stable p99, 0 errors",
                     _verdict(soak["memory_flat"] and soak["p99_stable"] and soak["zero_errors"])))

    lines = ["| figure | MQ Center: median (min-max) | baseline | target | verdict |", "|---|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} | {e} |" for a, b, c, d, e in rows]
    serving = f.get("serving")
    if serving:
        lines += ["", "Serving options (same machine, same run):", "",
                  "| server | produce msg/s | HTTP pull+ack msg/s | GET /healthz req/s | RSS MB |",
                  "|---|---|---|---|---|"]
        for row in (v for v in serving.values() if isinstance(v, dict) and "label" in v):
            lines.append(f"| {row['label']} | {_fmt(row['produce'])} | {_fmt(row['pull_ack'])} | "
                         f"{_fmt(row['healthz'])} | {row['rss_mb']:.0f} |")
    meta = data.get("meta", {})
    if meta:
        lines += ["", f"Scale: {meta.get('scale', {}).get('name')}; broker served by {meta.get('serving')}; "
                  f"{meta.get('cores')} cores. Commands (UTC start, 1-minute load average at start):", ""]
        lines += [f"- `{c['command']}` at {c['started']}, load {c['load_at_start']}"
                  + (f" ({c['note']})" if c.get("note") else "") for c in meta.get("commands", [])]
    return "\n".join(lines) + "\n"


def charts(data: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    f = data.get("figures", {})
    made: list[Path] = []

    def bars(path: str, title: str, items: list[tuple[str, dict[str, Any] | None]], unit: str) -> None:
        items = [(name, fig) for name, fig in items if fig]
        if not items:
            return
        fig, ax = plt.subplots(figsize=(8, 4))
        names = [n for n, _ in items]
        med = [v["median"] for _, v in items]
        err = [[v["median"] - v["min"] for _, v in items], [v["max"] - v["median"] for _, v in items]]
        ax.bar(names, med, yerr=err, capsize=4, color=["#2b6cb0" if n.startswith("MQ") else "#a0aec0" for n in names])
        ax.set_title(title)
        ax.set_ylabel(unit)
        plt.xticks(rotation=20, ha="right")
        fig.tight_layout()
        fig.savefig(out / path, dpi=100)
        plt.close(fig)
        made.append(out / path)

    bars("throughput_produce.png", "Produce throughput (median, min-max)", [
        ("MQ Center HTTP", f.get("mq_produce")), ("DB limit insert", f.get("dblimit_insert")),
        ("DB limit + traces", f.get("dblimit_insert_with_traces")), ("Celery enqueue", f.get("celery_enqueue")),
        ("django-q2 enqueue", f.get("djangoq_enqueue")), ("RabbitMQ confirms", f.get("rabbitmq_enqueue"))], "msg/s")
    bars("throughput_e2e.png", "End-to-end throughput (median, min-max)", [
        ("MQ Center SDK", f.get("mq_e2e")), ("MQ HTTP pull+ack", f.get("mq_http_pull_ack")),
        ("DB limit claim+ack", f.get("dblimit_claim_ack")), ("DB limit + traces", f.get("dblimit_claim_ack_with_traces")),
        ("Celery/Redis", f.get("celery_e2e")), ("django-q2", f.get("djangoq_e2e")), ("RabbitMQ", f.get("rabbitmq_e2e"))],
        "msg/s")
    lat, cel = f.get("mq_latency"), f.get("celery_latency")
    bars("latency.png", "Delivery latency, produce start → handler start", [
        ("MQ p50", lat and lat["p50"]), ("MQ p99", lat and lat["p99"]),
        ("Celery p50", cel and cel["p50"]), ("Celery p99", cel and cel["p99"])], "ms")
    soak = f.get("soak")
    if soak and soak.get("windows"):
        w = soak["windows"]
        t = [x["t"] for x in w]
        fig, (a1, a2, a3) = plt.subplots(3, 1, figsize=(8, 7), sharex=True)
        a1.plot(t, [x["handled_per_s"] for x in w], label="handled msg/s")
        a1.axhline(soak["target_rate"], ls="--", color="grey", label="target")
        a1.legend()
        a2.plot(t, [x["p50_ms"] for x in w], label="p50 ms")
        a2.plot(t, [x["p99_ms"] for x in w], label="p99 ms")
        a2.legend()
        a3.plot(t, [x["rss_mb"] for x in w], label="broker RSS MB")
        a3.legend()
        a3.set_xlabel("seconds")
        a1.set_title(f"Soak at {soak['target_rate']:.0f} msg/s")
        fig.tight_layout()
        fig.savefig(out / "soak.png", dpi=100)
        plt.close(fig)
        made.append(out / "soak.png")
    return made


def write(data: dict[str, Any], out: Path = RESULTS_DIR) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.md").write_text(table(data))
    charts(data, out)
