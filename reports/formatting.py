"""How report figures read to an operator: times without microseconds, ages in minutes and
hours, a one-line verdict per topic, links to the console's filtered message list.

Pure functions over a stored result (dicts), shared by the report pages, the e-mail and the
command line.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse


def parse_moment(text: str | None) -> datetime | None:
    """A stored ISO 8601 time (naive means UTC) as an aware datetime."""
    if not text:
        return None
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def human_moment(text: str | None, *, seconds: bool = False) -> str:
    """"2026-01-10 06:00 UTC" (with seconds when asked or not zero), "—" for none."""
    value = parse_moment(text)
    if value is None:
        return "—"
    value = value.astimezone(UTC)
    shown = "%Y-%m-%d %H:%M:%S" if seconds or value.second or value.microsecond else "%Y-%m-%d %H:%M"
    return value.strftime(shown) + " UTC"


def human_window(since: str | None, until: str | None) -> str:
    """A report's window; to the second when shorter than a minute or not on whole minutes."""
    start, end = parse_moment(since), parse_moment(until)
    if start is None or end is None:
        return "—"
    fine = (end - start).total_seconds() < 60
    return f"{human_moment(since, seconds=fine)} → {human_moment(until, seconds=fine)}"


def human_age(seconds: float | None) -> str:
    """0.3 s, 45 s, 12 min, 3 h 20 min, 2 d 4 h; "—" for none."""
    if seconds is None:
        return "—"
    if seconds < 10:
        return f"{seconds:.1f} s"
    total = round(seconds)
    if total < 60:
        return f"{total} s"
    minutes = total // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def human_hours(hours: float | None) -> str:
    return "—" if hours is None else human_age(hours * 3600)


def human_drain(row: dict[str, Any]) -> str:
    """A heap row's time to drain: "nothing waiting" without a backlog (not "0.0 s"), "never
    at current rates" when it does not shrink."""
    if not row.get("backlog"):
        return "nothing waiting"
    if row.get("drain_hours") is None:
        return "never at current rates"
    return human_hours(row["drain_hours"])


def message_list_url(*, topic: str, group: str | None = None, status: str | None = None,
                     added_after: str | None = None, added_before: str | None = None) -> str:
    """The console's message list filtered to a report row."""
    query = {"topic": topic}
    if group is not None:
        query["group"] = group
    if status:
        query["status"] = status
    for name, value in (("added_after", added_after), ("added_before", added_before)):
        moment = parse_moment(value)
        if moment is not None:
            query[name] = moment.isoformat()
    return f"{reverse('console:messages')}?{urlencode(query)}"


def heap_verdicts(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Per topic, one line: "growing, does not drain at current rates", "shrinking, drains
    in 3 h at current rates", "steady, nothing waiting", with its alarm if any.

    A topic's backlog and rates are its groups' sums (each group's rates are per its own
    active hour); it drains when it loses more than it gains.
    """
    topics: dict[str, dict[str, Any]] = {}
    for row in result.get("groups", []):
        item = topics.setdefault(row["topic"], {"topic": row["topic"], "backlog": 0, "in": 0.0, "out": 0.0})
        item["backlog"] += row["backlog"]
        item["in"] += row.get("inflow_per_hour") or 0.0
        item["out"] += row.get("outflow_per_hour") or 0.0
    alarmed = {row["topic"] for row in result.get("alarms", [])}
    verdicts = []
    for name, item in sorted(topics.items()):
        growth = item["in"] - item["out"]
        band = max(item["in"], item["out"]) * 0.01
        trend = "growing" if growth > band else "shrinking" if growth < -band else "steady"
        if item["backlog"] == 0:
            drain = "nothing waiting"
        elif item["out"] > item["in"]:
            drain = f"drains in {human_hours(item['backlog'] / (item['out'] - item['in']))} at current rates"
        else:
            drain = f"{item['backlog']} waiting, does not drain at current rates"
        line = f"{trend}, {drain}" + (", over its alarm threshold" if name in alarmed else "")
        verdicts.append({"topic": name, "verdict": line, "trend": trend, "alarm": name in alarmed})
    return verdicts


# The finished statuses of a trace report's row, as its columns name them, and how a verdict
# says each of them.
FINISHED = (("success", "succeeded"), ("fail", "failed"), ("timeout", "timed out"),
            ("expired", "expired"), ("cancelled", "cancelled"))


def trace_verdicts(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Per topic, one line: how many of its finished messages succeeded, and how the others
    ended (failed, timed out, expired, cancelled), its slowest group's p99 produce-to-success
    latency and its most frequent failure reason."""
    topics: dict[str, dict[str, Any]] = {}
    for row in result.get("groups", []):
        item = topics.setdefault(row["topic"], {"messages": 0, "finished": 0, "p99": None,
                                                **{name: 0 for name, _ in FINISHED}})
        item["messages"] += row["messages"]
        for name, _ in FINISHED:
            item[name] += row.get(name) or 0
            item["finished"] += row.get(name) or 0
        if row.get("latency_p99") is not None:
            item["p99"] = max(item["p99"] or 0.0, row["latency_p99"])
    reasons: dict[str, tuple[int, str]] = {}
    for row in result.get("reasons", []):
        if row["failures"] > reasons.get(row["topic"], (0, ""))[0]:
            reasons[row["topic"]] = (row["failures"], row["reason"])
    verdicts = []
    for name, item in sorted(topics.items()):
        parts = [f"{item['messages']} messages"]
        if item["finished"]:
            parts.append(f"{_percent(item['success'], item['finished'])} of the finished succeeded")
            parts += [f"{_percent(item[name], item['finished'])} {said}"
                      for name, said in FINISHED[1:] if item[name]]
        else:
            parts.append("none finished")
        if item["p99"] is not None:
            parts.append(f"p99 latency {human_age(item['p99'])}")
        if name in reasons:
            parts.append(f"most frequent failure: {reasons[name][1][:80]}")
        verdicts.append({"topic": name, "verdict": ", ".join(parts)})
    return verdicts


def _percent(part: int, whole: int) -> str:
    """A share as a whole percentage, never rounded to 0% or 100% while it is not."""
    value = 100 * part / whole
    if 0 < value < 1:
        return "<1%"
    if 99 < value < 100:
        return ">99%"
    return f"{value:.0f}%"
