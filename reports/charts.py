"""Report charts as PNG (matplotlib, no display): the heap report's e-mail and the console's
report pages show the same pictures. Images, not scripts: the console's CSP allows them.

`heap_figure` and `trace_figure` build the figures (tests read their axes); the `*_png`
functions render them.
"""

from __future__ import annotations

import io
from datetime import datetime
from typing import Any

TOP_BARS = 12
MAX_TOPICS = 6  # flow panels in one picture; the console draws one picture per topic


def _figure(width: float, height: float) -> Any:
    import matplotlib

    matplotlib.use("Agg")  # no display on servers and workers
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=90)


def _png(figure: Any) -> bytes:
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def hour_labels(hours: list[str]) -> list[str]:
    """"HH:MM" ticks, with the date ("MM-DD HH:MM") on the first and on each new day when
    the hours span more than one day."""
    days = {h[:10] for h in hours}
    labels, seen = [], None
    for h in hours:
        moment = datetime.fromisoformat(h)
        if len(days) > 1 and moment.date() != seen:
            labels.append(moment.strftime("%m-%d %H:%M"))
        else:
            labels.append(moment.strftime("%H:%M"))
        seen = moment.date()
    return labels


def topic_flow(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per topic: hours, inflow and outflow per hour (its groups summed), and how many of its
    messages were unfinished at the end of each hour (the count at `until` less the later
    hours' net flow)."""
    unfinished_end: dict[str, int] = {}
    for row in result.get("groups", []):
        unfinished_end[row["topic"]] = unfinished_end.get(row["topic"], 0) + row["backlog"] + row["delayed"] + row["running"]
    topics: dict[str, dict[str, Any]] = {}
    for series in result.get("hourly", []):
        item = topics.setdefault(series["topic"], {"hours": [p["hour"] for p in series["hours"]],
                                                   "inflow": [0] * len(series["hours"]),
                                                   "outflow": [0] * len(series["hours"])})
        for i, point in enumerate(series["hours"]):
            item["inflow"][i] += point["inflow"]
            item["outflow"][i] += point["outflow"]
    for name, item in topics.items():
        level = unfinished_end.get(name, 0)
        levels = []
        for i in range(len(item["hours"]) - 1, -1, -1):
            levels.append(level)
            level -= item["inflow"][i] - item["outflow"][i]
        item["unfinished"] = levels[::-1]
    return dict(sorted(topics.items()))


def heap_figure(result: dict[str, Any], *, topic: str | None = None) -> Any:
    """Per topic, inflow and outflow per hour with its unfinished messages over the window;
    beside them the backlog of the largest groups, each with its topic's alarm threshold."""
    flows = topic_flow(result)
    if topic is not None:
        flows = {name: item for name, item in flows.items() if name == topic}
    flows = dict(list(flows.items())[:MAX_TOPICS])
    rows = sorted((r for r in result.get("groups", []) if topic is None or r["topic"] == topic),
                  key=lambda r: (-r["backlog"], r["topic"], r["group"]))
    groups = [r for r in rows if r["backlog"] > 0][:TOP_BARS]
    panels = max(1, len(flows))
    figure = _figure(11, 2.6 * panels + 0.6)
    grid = figure.add_gridspec(panels, 2, width_ratios=[3, 2])
    for i, (name, item) in enumerate(flows.items()):
        axes = figure.add_subplot(grid[i, 0])
        x = range(len(item["hours"]))
        axes.plot(x, item["inflow"], label="inflow", marker=".")
        axes.plot(x, item["outflow"], label="outflow", marker=".")
        axes.set_ylabel("messages / hour")
        axes.set_title(f"{name}: flow per hour, unfinished at each hour's end")
        level = axes.twinx()
        level.step(x, item["unfinished"], where="post", color="#888888", linestyle="--", label="unfinished")
        level.set_ylabel("unfinished")
        axes.set_xticks(list(x))
        axes.set_xticklabels(hour_labels(item["hours"]), rotation=90, fontsize=7)
        axes.set_xlabel("hour (UTC)")
        axes.legend(fontsize=7, loc="upper left")
        level.legend(fontsize=7, loc="upper right")
    backlog = figure.add_subplot(grid[:, 1])
    positions = list(range(len(groups)))
    backlog.barh(positions, [r["backlog"] for r in groups], color="#c0504d", label="backlog")
    thresholds = result.get("thresholds") or {}
    marked = [(i, thresholds[r["topic"]]) for i, r in enumerate(groups) if thresholds.get(r["topic"])]
    for i, limit in marked:
        backlog.vlines(limit, i - 0.4, i + 0.4, colors="#000000", linewidth=2,
                       label="alarm threshold" if i == marked[0][0] else None)
    backlog.set_yticks(positions)
    backlog.set_yticklabels([f"{r['topic']}/{r['group']}" for r in groups], fontsize=7)
    backlog.invert_yaxis()
    backlog.set_xlabel("messages waiting (deliverable)")
    backlog.set_title("Backlog as of the window's end" if groups else "No backlog")
    if groups:
        backlog.legend(fontsize=7)
    return figure


def heap_chart_png(result: dict[str, Any], *, topic: str | None = None) -> bytes:
    return _png(heap_figure(result, topic=topic))


def trace_figure(result: dict[str, Any]) -> Any:
    """Outcomes per topic and group (stacked bars) and produce -> success latency percentiles
    on a log scale (one slow group must not flatten the others), bars centred on labels."""
    groups = sorted(result.get("groups", []), key=lambda r: -r["messages"])[:TOP_BARS]
    names = [f"{r['topic']}/{r['group']}" for r in groups]
    figure = _figure(11, 4.4)
    outcomes, latency = figure.subplots(1, 2)
    left = [0] * len(groups)
    colors = {"success": "#4f9a4f", "fail": "#c0504d", "timeout": "#e0a030", "expired": "#8c564b",
              "cancelled": "#b0b0b0", "new": "#7f9fbf", "running": "#9f7fbf", "prepared": "#d0c0e0"}
    for name, color in colors.items():
        values = [r.get(name, 0) for r in groups]
        if not any(values) and name in ("expired", "cancelled", "prepared"):
            continue  # statuses most reports never see stay out of the legend
        outcomes.barh(range(len(groups)), values, left=left, color=color, label=name)
        left = [a + b for a, b in zip(left, values, strict=True)]
    outcomes.set_yticks(range(len(groups)))
    outcomes.set_yticklabels(names, fontsize=7)
    outcomes.invert_yaxis()
    outcomes.set_xlabel("messages produced in the window")
    outcomes.set_title("Messages by final status")
    outcomes.legend(fontsize=7)
    timed = [r for r in groups if r.get("latency_p50") is not None]
    height = 0.25
    keys = ("latency_p50", "latency_p90", "latency_p99")
    for offset, key in zip((-height, 0.0, height), keys, strict=True):
        latency.barh([i + offset for i in range(len(timed))], [max(r[key], 1e-3) for r in timed],
                     height=height, label=key.split("_")[1])
    latency.set_yticks(range(len(timed)))
    latency.set_yticklabels([f"{r['topic']}/{r['group']}" for r in timed], fontsize=7)
    latency.invert_yaxis()
    latency.set_xscale("log")
    latency.set_xlabel("seconds, produce to success (log scale)")
    latency.set_title("Latency percentiles (nearest rank)")
    if timed:
        latency.legend(fontsize=7)
    return figure


def trace_chart_png(result: dict[str, Any]) -> bytes:
    return _png(trace_figure(result))
