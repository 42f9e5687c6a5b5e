"""Report charts as JSON series for the console's uPlot charts (static/console/report_charts.js,
uPlot vendored in static/vendor/uplot): the same pictures the e-mail gets as PNG
(`reports.charts`), drawn in the page with hover values."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from reports.charts import TOP_BARS, topic_flow


def _epoch(hour: str) -> int:
    return int(datetime.fromisoformat(hour).replace(tzinfo=UTC).timestamp())


def heap_chart_data(result: dict[str, Any]) -> dict[str, Any]:
    """Per topic, inflow and outflow per hour and the unfinished count at each hour's end
    (x: the hour's start, seconds since the epoch, UTC); the backlog of the largest groups
    with their topic's alarm threshold."""
    thresholds = result.get("thresholds") or {}
    rows = sorted(
        (r for r in result.get("groups", []) if r["backlog"] > 0),
        key=lambda r: (-r["backlog"], r["topic"], r["group"]),
    )[:TOP_BARS]
    return {
        "kind": "heap",
        "topics": [
            {
                "topic": name,
                "t": [_epoch(h) for h in item["hours"]],
                "inflow": item["inflow"],
                "outflow": item["outflow"],
                "unfinished": item["unfinished"],
            }
            for name, item in topic_flow(result).items()
        ],
        "backlog": {
            "labels": [f"{r['topic']}/{r['group']}" for r in rows],
            "backlog": [r["backlog"] for r in rows],
            "threshold": [thresholds.get(r["topic"]) for r in rows],
        },
    }


def trace_chart_data(result: dict[str, Any]) -> dict[str, Any]:
    """Produce -> success latency percentiles (nearest rank) of the groups with any success,
    busiest first: the latency distribution, drawn on a log scale."""
    rows = sorted(
        (r for r in result.get("groups", []) if r.get("latency_p50") is not None),
        key=lambda r: -r["messages"],
    )[:TOP_BARS]
    return {
        "kind": "trace",
        "labels": [f"{r['topic']}/{r['group']}" for r in rows],
        **{name: [r[f"latency_{name}"] for r in rows] for name in ("p50", "p90", "p99")},
    }
