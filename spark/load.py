"""Load: report DataFrames to plain, JSON-ready Python (lists of dicts) for storage."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

from pyspark.sql import DataFrame

SECONDS_DIGITS = 3


def plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else round(value, SECONDS_DIGITS)
    return value


def rows(df: DataFrame, *, order: list[str] | None = None) -> list[dict[str, Any]]:
    """Collect a small result DataFrame as dicts (renaming group_name to group)."""
    if order:
        df = df.orderBy(*order)
    out = []
    for row in df.collect():
        item = {("group" if k == "group_name" else k): plain(v) for k, v in row.asDict().items()}
        out.append(item)
    return out


def hours_between(since: datetime, until: datetime) -> list[datetime]:
    """The start of every hour that overlaps [since, until)."""
    start = since.replace(minute=0, second=0, microsecond=0)
    hours = []
    while start < until:
        hours.append(start)
        start += timedelta(hours=1)
    return hours


def hourly_series(
    flow: list[dict[str, Any]], *, since: datetime, until: datetime
) -> list[dict[str, Any]]:
    """Per topic and group, inflow and outflow for every hour of the window (zeros filled)."""
    hours = [h.isoformat() for h in hours_between(since, until)]
    by_key: dict[tuple[str, str], dict[str, dict[str, int]]] = {}
    for row in flow:
        by_key.setdefault((row["topic"], row["group"]), {})[row["hour"]] = row
    series = []
    for (topic, group), known in sorted(by_key.items()):
        points = [
            {
                "hour": hour,
                "inflow": int(known.get(hour, {}).get("inflow", 0)),
                "outflow": int(known.get(hour, {}).get("outflow", 0)),
            }
            for hour in hours
        ]
        series.append({"topic": topic, "group": group, "hours": points})
    return series
