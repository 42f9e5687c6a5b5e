"""Report pages draw their charts in headless Chromium with uPlot, as the dashboard does: per
topic the hourly flow (time axis in UTC, messages per hour, unfinished on the right), the
backlog with alarm thresholds, and the latency percentiles on a log scale; under the strict
CSP (the page fixture fails on any CSP report)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.reports.test_presentation import HEAP, TRACE

from .conftest import Console, login, shot

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


def done_run(console: Console, kind: str, result: dict[str, Any]) -> int:
    """A finished run as the worker stores it (the charts need only its result)."""
    params = {"since": result["since"] + "+00:00", "until": result["until"] + "+00:00"}
    console.server.sql(
        "INSERT INTO mq_report_run (kind, params, state, progress, note, error, result, actor, emailed_to,"
        " created_at, started_at, finished_at) VALUES (%s, %s, 'done', 100, 'done in 1.0s', '', %s, 'test', '[]',"
        " UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
        kind,
        json.dumps(params),
        json.dumps(result),
    )
    [(run_id,)] = console.server.sql("SELECT MAX(id) FROM mq_report_run WHERE kind = %s", kind)
    return int(run_id)


def test_it_draws_a_heap_reports_flow_and_backlog_charts_with_axes(
    page: Any, console: Console
) -> None:
    run_id = done_run(console, "heap", HEAP)
    login(page, console)
    page.goto(f"{console.url}/reports/{run_id}/")
    charts = page.locator("#report-charts")
    page.wait_for_selector("#report-charts[data-report-chart-drawn='3']")
    flows = charts.locator(".report-flow")
    assert [flows.nth(i).get_attribute("data-topic") for i in range(flows.count())] == [
        "mail",
        "orders",
    ]
    assert flows.nth(1).locator(".u-axis").count() == 3  # hours, messages / hour, unfinished
    assert "orders: flow per hour" in flows.nth(1).locator(".u-title").inner_text()
    assert charts.locator(".report-backlog .u-axis").count() == 2  # groups, messages waiting
    box = flows.nth(1).locator(".u-over").bounding_box()
    page.mouse.move(box["x"] + 2, box["y"] + box["height"] / 2)  # the first hour
    legend = flows.nth(1).locator(".u-legend").inner_text().lower()
    assert (
        re.search(r"2026-01-09\s+22:00", legend) and "inflow" in legend and "unfinished" in legend
    )
    shot(page, "report-heap-charts")


def test_it_draws_a_trace_reports_latency_on_a_log_scale(page: Any, console: Console) -> None:
    run_id = done_run(console, "trace", {**TRACE, "attempts": [], "consumers": []})
    login(page, console)
    page.goto(f"{console.url}/reports/{run_id}/")
    page.wait_for_selector("#report-charts[data-report-chart-drawn='1']")
    latency = page.locator("#report-charts .report-latency")
    assert latency.locator(".u-axis").count() == 2
    box = latency.locator(".u-over").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 4, box["y"] + box["height"] / 2)  # the first group
    legend = latency.locator(".u-legend").inner_text().lower()
    assert "orders/default" in legend and "p99289 s" in legend.replace("\n", "")  # its p99
    page.mouse.move(box["x"] + box["width"] * 3 / 4, box["y"] + box["height"] / 2)
    assert "mail/default" in latency.locator(".u-legend").inner_text()  # 2024/x had no success
    shot(page, "report-trace-latency")
