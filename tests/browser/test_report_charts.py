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


def overflow(page: Any, selector: str) -> dict[str, float]:
    """How a table sits in its scrolling wrapper, and where its last column ends."""
    return page.evaluate(
        """(selector) => {
            const table = document.querySelector(selector), wrap = table.closest('.table-wrap');
            const cells = table.querySelectorAll('tr:first-child > *');
            return {table: table.scrollWidth, wrap: wrap.clientWidth, page: document.documentElement.clientWidth,
                    last: cells[cells.length - 1].getBoundingClientRect().right};
        }""",
        selector,
    )


def test_the_report_tables_fit_a_1440_px_screen_and_the_right_axis_title_is_whole(
    page: Any, console: Console
) -> None:
    page.set_viewport_size({"width": 1440, "height": 900})
    rows = [{**g, "expired": 12, "cancelled": 3, "prepared": 2, "retried": 4, "attempts_avg": 1.25,
             "attempts_max": 3, "lease_expiries": 1, "latency_p50": 12.5, "latency_p90": 120.25,
             "latency_p99": 1289.75, "processing_p50": 0.125, "processing_p90": 1.5, "processing_p99": 12.875,
             "messages": 12345, "success": 11000, "group": "settlement-eu-west"} for g in TRACE["groups"]]
    trace_id = done_run(console, "trace", {**TRACE, "groups": rows, "attempts": [], "consumers": []})
    login(page, console)
    page.goto(f"{console.url}/reports/{trace_id}/")
    fit = overflow(page, "#trace-groups")
    assert fit["table"] <= fit["wrap"] and fit["last"] <= fit["page"], fit
    header = page.locator("#trace-groups thead th").all_inner_texts()
    assert [h.lower() for h in header[8:11]] == ["new", "running", "prepared"]  # its own column
    assert "prepared" not in page.locator("#trace-groups tbody td:nth-child(10)").first.inner_text()
    shot(page, "report-trace-1440")

    heap_id = done_run(console, "heap", HEAP)
    page.goto(f"{console.url}/reports/{heap_id}/")
    page.wait_for_selector("#report-charts[data-report-chart-drawn='3']")
    fit = overflow(page, "#heap-groups")
    assert fit["table"] <= fit["wrap"] and fit["last"] <= fit["page"], fit
    chart = page.locator("#report-charts .report-flow").first
    box, canvas = chart.bounding_box(), chart.locator("canvas").bounding_box()
    assert box["x"] <= canvas["x"] and canvas["x"] + canvas["width"] <= box["x"] + box["width"], (canvas, box)
    chart.screenshot(path="/tmp/rep-flow-chart.png")
    shot(page, "report-heap-1440")
