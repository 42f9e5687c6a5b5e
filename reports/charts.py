"""Report charts as PNG (matplotlib, no display): the heap report's e-mail and the console's
report pages show the same pictures. Images, not scripts: the console's CSP allows them."""

from __future__ import annotations

import io
from typing import Any

TOP_BARS = 12


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


def heap_chart_png(result: dict[str, Any]) -> bytes:
    """Inflow vs outflow per hour (all groups of the report) and backlog of the largest
    groups, as one PNG."""
    hours: dict[str, list[int]] = {}
    for series in result.get("hourly", []):
        for point in series["hours"]:
            totals = hours.setdefault(point["hour"], [0, 0])
            totals[0] += point["inflow"]
            totals[1] += point["outflow"]
    labels = sorted(hours)
    groups = sorted(result.get("groups", []), key=lambda r: -r["backlog"])[:TOP_BARS]
    figure = _figure(10, 4)
    flow, backlog = figure.subplots(1, 2)
    flow.plot(range(len(labels)), [hours[h][0] for h in labels], label="inflow", marker=".")
    flow.plot(range(len(labels)), [hours[h][1] for h in labels], label="outflow", marker=".")
    flow.set_title("Messages per hour")
    flow.set_xticks(range(len(labels)))
    flow.set_xticklabels([h[11:16] for h in labels], rotation=90, fontsize=7)
    flow.legend()
    names = [f"{r['topic']}/{r['group']}" for r in groups]
    backlog.barh(range(len(groups)), [r["backlog"] for r in groups], color="#c0504d")
    backlog.set_yticks(range(len(groups)))
    backlog.set_yticklabels(names, fontsize=7)
    backlog.invert_yaxis()
    backlog.set_title("Backlog (deliverable)")
    return _png(figure)


def trace_chart_png(result: dict[str, Any]) -> bytes:
    """Outcomes per topic and group (stacked bars) and produce -> success latency
    percentiles, as one PNG."""
    groups = sorted(result.get("groups", []), key=lambda r: -r["messages"])[:TOP_BARS]
    names = [f"{r['topic']}/{r['group']}" for r in groups]
    figure = _figure(10, 4)
    outcomes, latency = figure.subplots(1, 2)
    left = [0] * len(groups)
    colors = {"success": "#4f9a4f", "fail": "#c0504d", "timeout": "#e0a030", "new": "#7f9fbf", "running": "#9f7fbf"}
    for name, color in colors.items():
        values = [r[name] for r in groups]
        outcomes.barh(range(len(groups)), values, left=left, color=color, label=name)
        left = [a + b for a, b in zip(left, values, strict=True)]
    outcomes.set_yticks(range(len(groups)))
    outcomes.set_yticklabels(names, fontsize=7)
    outcomes.invert_yaxis()
    outcomes.set_title("Messages by final status")
    outcomes.legend(fontsize=7)
    width = 0.25
    for offset, key in enumerate(("latency_p50", "latency_p90", "latency_p99")):
        latency.barh([i + offset * width for i in range(len(groups))], [r[key] or 0 for r in groups],
                     height=width, label=key.split("_")[1])
    latency.set_yticks(range(len(groups)))
    latency.set_yticklabels(names, fontsize=7)
    latency.invert_yaxis()
    latency.set_title("Produce to success (seconds)")
    latency.legend(fontsize=7)
    return _png(figure)
