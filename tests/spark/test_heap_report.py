"""The heap report, figure by figure, against the same figures computed in plain Python."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from tests.spark.conftest import THRESHOLDS
from tests.spark.world import BURST, SINCE, UNTIL, expected_heap, state_at

pytestmark = [pytest.mark.spark, pytest.mark.django_db, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def report(heap_run: dict[str, Any]) -> dict[str, Any]:
    assert heap_run["run"].state == "done", heap_run["run"].error
    return heap_run["run"].result


@pytest.fixture(scope="module")
def truth(stored: dict[str, Any]) -> dict[str, Any]:
    return expected_heap(stored["world"], SINCE, UNTIL, THRESHOLDS)


def close(actual: Any, expected: Any) -> bool:
    if expected is None or actual is None:
        return actual is expected
    return actual == pytest.approx(expected, abs=2e-3)


def test_it_reports_backlog_and_oldest_deliverable_age(report: dict[str, Any], truth: dict[str, Any]) -> None:
    got = {(g["topic"], g["group"]): g for g in report["groups"]}
    assert set(got) == set(truth["groups"])
    for key, expected in truth["groups"].items():
        for name in ("backlog", "delayed", "running"):
            assert got[key][name] == expected[name], (key, name)
        assert close(got[key]["oldest_age_seconds"], expected["oldest_age_seconds"]), key
    assert sum(g["backlog"] for g in report["groups"]) > 0
    assert sum(g["delayed"] for g in report["groups"]) > 0


def test_the_heap_is_the_state_as_of_until_not_the_state_when_read(
    report: dict[str, Any], truth: dict[str, Any], stored: dict[str, Any]
) -> None:
    world = stored["world"]
    # The history goes on past the window: produced, pulled and finished after `until`.
    assert any(m["add_time"] >= UNTIL for m in world.messages)
    changed = [m for m in world.messages if m["add_time"] < UNTIL and m["update_time"] >= UNTIL
               and state_at(world, m["id"], UNTIL)[0] != m["status"]]
    assert len(changed) > 5
    assert report["as_of"] == "2026-01-10T12:00:00"
    got = {(g["topic"], g["group"]): g for g in report["groups"]}
    for key, expected in truth["groups"].items():
        assert [got[key][n] for n in ("backlog", "delayed", "running")] == [
            expected[n] for n in ("backlog", "delayed", "running")], key


def test_redriven_messages_flow_in_as_they_flow_out_again(report: dict[str, Any], stored: dict[str, Any]) -> None:
    """In - out over the window is the change of the unfinished messages between its ends."""
    world = stored["world"]
    assert any(e["event"] == "redriven" and SINCE <= e["at"] < UNTIL for e in world.traces)

    def unfinished(moment: Any) -> dict[tuple[str, str], int]:
        counts: dict[tuple[str, str], int] = {}
        for m in world.messages:
            state = state_at(world, m["id"], moment)
            if state is not None and state[0] in ("NEW", "RUNNING"):
                key = (m["topic"], m["group_name"])
                counts[key] = counts.get(key, 0) + 1
        return counts

    start, end = unfinished(SINCE), unfinished(UNTIL)
    for g in report["groups"]:
        key = (g["topic"], g["group"])
        assert g["inflow"] - g["outflow"] == end.get(key, 0) - start.get(key, 0), key


def test_it_reports_inflow_and_outflow_per_hour(report: dict[str, Any], truth: dict[str, Any]) -> None:
    expected_hours = [f"2026-01-10T{h:02d}:00:00" for h in range(6, 12)]
    for series in report["hourly"]:
        assert [p["hour"] for p in series["hours"]] == expected_hours
        for point in series["hours"]:
            hour = datetime.fromisoformat(point["hour"] + "+00:00")
            assert [point["inflow"], point["outflow"]] == truth["hourly"].get(
                (series["topic"], series["group"], hour), [0, 0]
            ), (series["topic"], series["group"], point)
    assert sum(p["outflow"] for s in report["hourly"] for p in s["hours"]) > 0


def test_it_reports_growth_trend_and_time_to_drain(report: dict[str, Any], truth: dict[str, Any]) -> None:
    got = {(g["topic"], g["group"]): g for g in report["groups"]}
    # Rates are per active hour: the bursty topic's hour counts, its idle hours do not.
    burst = got[BURST]
    assert 0 < burst["active_hours"] < 6
    assert close(burst["inflow_per_hour"], burst["inflow"] / burst["active_hours"])
    for key, expected in truth["groups"].items():
        for name in ("inflow", "outflow", "active_hours", "trend"):
            assert got[key][name] == expected[name], (key, name)
        for name in ("inflow_per_hour", "outflow_per_hour", "growth_per_hour", "drain_hours"):
            assert close(got[key][name], expected[name]), (key, name, got[key][name], expected[name])


def test_it_ranks_the_groups_over_their_alarm_threshold(report: dict[str, Any], truth: dict[str, Any]) -> None:
    got = [(a["topic"], a["group"], a["backlog"], a["threshold"]) for a in report["alarms"]]
    assert got == truth["alarms"]
    assert {a[0] for a in got} == {"orders", "2024"}  # "mail" stays under its threshold
