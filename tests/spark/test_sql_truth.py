"""Both reports against the same figures computed with plain SQL over the live and archive
tables (taken before the exported history was purged from them, so the reports' Parquet-only
history counts exactly as it did in the tables)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.django_db, pytest.mark.timeout(300)]


def close(actual: Any, expected: Any) -> bool:
    if expected is None or actual is None:
        return actual is expected
    return actual == pytest.approx(expected, abs=2e-3)


def test_the_trace_report_matches_sql_over_the_tables(trace_run: dict[str, Any], stored: dict[str, Any]) -> None:
    truth = stored["sql_truth"]["trace"]
    assert stored["counts"]["purged"] > 0  # part of the history was read from Parquet only
    report = trace_run["run"].result
    got = {(g["topic"], g["group"]): g for g in report["groups"]}
    assert set(got) == set(truth["groups"])
    for key, expected in truth["groups"].items():
        for name, value in expected.items():
            assert close(got[key][name], value), (key, name, got[key][name], value)
    assert {(a["topic"], a["group"], a["attempt"]): a["messages"] for a in report["attempts"]} == truth["attempts"]
    consumers = {(c["topic"], c["group"], c["consumer"]): c for c in report["consumers"]}
    assert set(consumers) == set(truth["consumers"])
    for key, expected in truth["consumers"].items():
        for name, value in expected.items():
            assert close(consumers[key][name], value), (key, name, consumers[key][name], value)


def test_the_heap_flow_matches_sql_over_the_tables(heap_run: dict[str, Any], stored: dict[str, Any]) -> None:
    truth = stored["sql_truth"]["flow"]
    got: dict[tuple[str, str, datetime], list[int]] = {}
    for series in heap_run["run"].result["hourly"]:
        for point in series["hours"]:
            if point["inflow"] or point["outflow"]:
                hour = datetime.fromisoformat(point["hour"])
                got[(series["topic"], series["group"], hour)] = [point["inflow"], point["outflow"]]
    expected = {(t, g, h.replace(tzinfo=None) if h.tzinfo else h): v for (t, g, h), v in truth.items()}
    assert got == expected
    assert any(v[0] for v in expected.values()) and any(v[1] for v in expected.values())


def test_the_heap_as_of_until_matches_sql_over_the_tables(heap_run: dict[str, Any], stored: dict[str, Any]) -> None:
    truth = stored["sql_truth"]["state"]
    got = {(g["topic"], g["group"]): g for g in heap_run["run"].result["groups"]}
    empty = {"backlog": 0, "delayed": 0, "running": 0, "oldest_age_seconds": None}
    for key, row in got.items():
        for name, value in truth.get(key, empty).items():
            assert close(row[name], value), (key, name, row[name], value)
    waiting = {k for k, v in truth.items() if v["backlog"] or v["delayed"] or v["running"]}
    assert waiting and waiting <= set(got)
