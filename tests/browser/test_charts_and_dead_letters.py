"""Charts and dead letters in headless Chromium at 1,440 px: the dashboard chart draws with
axes, hover values and ranges; 2,000 similar failures are one dead-letter group,
redriven in one action as a background job with a progress bar."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import Console, login, shot

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

FAILURES = 2000


@pytest.fixture
def wide_page(browser: Any, console: Console) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None)
    page.on("dialog", lambda dialog: dialog.accept())
    yield page
    assert errors == [], errors
    context.close()


def fail_all(console: Console, topic: str, group: str, expect: int) -> None:
    """Pull everything and fail each message with its own log line, as a consumer would."""
    done = 0
    deadline = time.monotonic() + 120
    while done < expect and time.monotonic() < deadline:
        pulled = console.api.post("/api/v1/pull", json={"topic": topic, "group": group, "consumer": "host-e:5:c",
                                                        "max_messages": 200, "wait_seconds": 5})
        assert pulled.status_code == 200, pulled.text
        messages = pulled.json()["messages"]
        if messages:
            acked = console.api.post("/api/v1/ack", json={"consumer": "host-e:5:c", "results": [
                {"id": m["id"], "status": "FAIL", "log": f"bad payload for item {m['data']['n']}"} for m in messages]})
            assert acked.status_code == 200, acked.text
            done += len(messages)
    assert done == expect


def test_it_shows_2000_similar_failures_as_one_group_and_redrives_it_with_progress(
    wide_page: Any, console: Console,
) -> None:
    page = wide_page
    response = console.api.post("/api/v1/topics", json={"topic": "parcels", "retry_count": 0,
                                                         "groups": [{"group": "labels"}]})
    assert response.status_code == 201, response.text
    for start in range(0, FAILURES, 500):
        console.produce("parcels", [{"group": "labels", "data": {"n": i}} for i in range(start, start + 500)])
    fail_all(console, "parcels", "labels", FAILURES)

    login(page, console)
    page.goto(f"{console.url}/dead/?topic=parcels")
    rows = page.locator("#dead-table tr.dead-group")
    assert rows.count() == 1
    assert rows.locator(".dead-reason").inner_text() == "bad payload for item <n>"
    assert rows.locator(".dead-count").inner_text() == str(FAILURES)
    shot(page, "dead-letters-1440")
    rows.locator("button.dead-redrive").click()
    page.wait_for_url(re.compile(r".*/jobs/\d+/$"))
    assert page.locator("#job-progress").count() == 1
    shot(page, "dead-letters-job-progress")
    page.wait_for_selector("#job-result", timeout=120_000)  # polled by HTMX, worked by Celery
    assert f"Done: redrive of {FAILURES} messages" in page.inner_text("#job-result")
    shot(page, "dead-letters-job-done")
    page.goto(f"{console.url}/dead/?topic=parcels")
    assert page.locator("#dead-table tr.dead-group").count() == 0


def test_it_draws_the_dashboard_chart_with_axes_and_switches_ranges(wide_page: Any, console: Console) -> None:
    page = wide_page
    login(page, console)
    chart = page.locator("[data-chart-src]")
    page.wait_for_selector("[data-chart-drawn='1h']")
    assert chart.locator(".chart-counters canvas").count() == 1
    assert chart.locator(".chart-counters .u-axis").count() == 2  # time and messages
    assert chart.locator(".chart-backlog .u-axis").count() == 3  # time, messages, seconds
    assert chart.get_attribute("data-chart-points") == "60"
    box = chart.locator(".chart-counters .u-over").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    legend = chart.locator(".chart-counters .u-legend").inner_text().lower()
    assert "produced" in legend and re.search(r"time\s*\d{4}-\d{2}-\d{2}", legend)  # the hovered point
    shot(page, "dashboard-chart-1440")
    chart.locator("[data-range='7d']").click()  # the dashboard's one range: cards and charts
    page.wait_for_url("**/?window=week")
    page.wait_for_selector("[data-chart-drawn='7d']")
    assert chart.get_attribute("data-chart-points") == "84"
    shot(page, "dashboard-chart-7d-1440")
