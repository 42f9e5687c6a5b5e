"""The trace report, figure by figure, against the same figures computed in plain Python."""

from __future__ import annotations

from typing import Any

import pytest

from tests.spark.world import SINCE, UNTIL, expected_trace

pytestmark = [pytest.mark.spark, pytest.mark.django_db, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def report(trace_run: dict[str, Any]) -> dict[str, Any]:
    assert trace_run["run"].state == "done", trace_run["run"].error
    return trace_run["run"].result


@pytest.fixture(scope="module")
def truth(stored: dict[str, Any]) -> dict[str, Any]:
    return expected_trace(stored["world"], SINCE, UNTIL)


def close(actual: Any, expected: Any) -> bool:
    if expected is None or actual is None:
        return actual is expected
    return actual == pytest.approx(expected, abs=2e-3)


def test_it_reads_live_archived_and_exported_messages(report: dict[str, Any], truth: dict[str, Any], stored: dict[str, Any]) -> None:
    counts = stored["counts"]
    assert counts["purged"] > 0 and counts["archived"] > counts["purged"]  # all three sources used
    assert report["messages"] == truth["messages"]
    assert sum(g["messages"] for g in report["groups"]) == truth["messages"]


def test_it_counts_outcomes_and_attempts_per_group(report: dict[str, Any], truth: dict[str, Any]) -> None:
    got = {(g["topic"], g["group"]): g for g in report["groups"]}
    assert set(got) == set(truth["groups"])
    for key, expected in truth["groups"].items():
        for name in ("messages", "success", "fail", "timeout", "new", "running", "attempts_max",
                     "retried", "lease_expiries"):
            assert got[key][name] == expected[name], (key, name)
        assert close(got[key]["attempts_avg"], expected["attempts_avg"]), key
    assert {(a["topic"], a["group"], a["attempt"]): a["messages"] for a in report["attempts"]} == truth["attempts"]


def test_it_computes_latency_and_processing_percentiles(report: dict[str, Any], truth: dict[str, Any]) -> None:
    got = {(g["topic"], g["group"]): g for g in report["groups"]}
    for key, expected in truth["groups"].items():
        for name in ("latency_p50", "latency_p90", "latency_p99",
                     "processing_p50", "processing_p90", "processing_p99"):
            assert close(got[key][name], expected[name]), (key, name, got[key][name], expected[name])
    assert any(g["latency_p99"] > g["latency_p50"] for g in report["groups"])


def test_it_ranks_the_most_frequent_failure_reasons(report: dict[str, Any], truth: dict[str, Any]) -> None:
    got: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for row in report["reasons"]:
        got.setdefault((row["topic"], row["group"]), []).append((row["reason"], row["failures"]))
    assert got == truth["reasons"]
    reasons = {r["reason"] for r in report["reasons"]}
    assert "db timeout" in reasons and "(no reason given)" in reasons
    assert all(len(r) <= 200 and "\n" not in r for r in reasons)


def test_it_reports_load_and_failure_rate_per_consumer(report: dict[str, Any], truth: dict[str, Any]) -> None:
    got = {(c["topic"], c["group"], c["consumer"]): c for c in report["consumers"]}
    assert set(got) == set(truth["consumers"])
    for key, expected in truth["consumers"].items():
        for name in ("deliveries", "released", "attempts", "acked", "nacked", "expired"):
            assert got[key][name] == expected[name], (key, name)
        assert close(got[key]["failure_rate"], expected["failure_rate"]), key
        assert close(got[key]["processing_p50"], expected["processing_p50"]), key


def test_a_consumers_expired_leases_count_as_failures_and_released_pulls_as_no_attempt(
    report: dict[str, Any],
) -> None:
    rows = report["consumers"]
    assert sum(c["expired"] for c in rows) > 0 and sum(c["released"] for c in rows) > 0
    for c in rows:
        ended = c["acked"] + c["nacked"] + c["expired"]
        assert c["attempts"] == c["deliveries"] - c["released"]
        assert c["attempts"] >= ended
        if ended:
            assert close(c["failure_rate"], (c["nacked"] + c["expired"]) / ended)
