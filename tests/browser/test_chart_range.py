"""The dashboard's charts at 1,440 and 390 px, in English and Chinese: one range selector
for its cards and its charts, counts' y-axes from 0, time ticks in 24-hour numbers in either
language, and each y-axis wide enough for its numbers and its title."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import Console, login, page_at, shot

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


@pytest.fixture(scope="module")
def traffic(console: Console) -> None:
    response = console.api.post("/api/v1/topics", json={"topic": "charted", "groups": [{"group": "g"}]})
    assert response.status_code == 201, response.text
    for _ in range(4):
        console.produce("charted", [{"data": {"n": i}} for i in range(500)])


@pytest.fixture(params=[(1440, "en-US"), (390, "en-US"), (1440, "zh-CN"), (390, "zh-CN")],
                ids=lambda p: f"{p[0]}px-{p[1]}")
def sized_page(request: Any, browser: Any, console: Console) -> Iterator[Any]:
    with page_at(browser, *request.param) as page:
        yield page


def test_it_has_one_range_for_cards_and_charts_with_axes_from_zero_in_either_language(
    sized_page: Any, console: Console, traffic: None,
) -> None:
    page = sized_page
    width = page.viewport_size["width"]
    chinese = page.evaluate("navigator.language").startswith("zh")
    login(page, console)
    chart = page.locator("[data-chart-src]")
    page.wait_for_selector("[data-chart-drawn='1h']")
    # One selector: no second set of range tabs above the cards.
    assert page.locator("a[href*='window=']").count() == 3
    assert chart.locator("a[href*='window=']").count() == 3  # the charts' range is the cards' window
    assert page.locator("[data-range]").count() == 3
    # Counts (and the oldest age) start at 0.
    expect(chart).to_have_attribute("data-chart-ymin", "0,0,0")
    # Time ticks: 24-hour numbers, no English "am"/"pm" or US dates in either language.
    ticks = chart.locator(".chart-counters .uplot").get_attribute("data-time-ticks")
    assert ticks and re.fullmatch(r"(\d{2}:\d{2}(\n\d{2}-\d{2})?\|?)+", ticks), ticks
    assert "am" not in ticks and "pm" not in ticks and "/" not in ticks
    # Each y-axis holds its widest number and its title: 2,000 produced needs 4 digits.
    for axis in chart.locator(".chart-counters .u-axis").all()[1:]:
        assert axis.bounding_box()["width"] >= 50, axis.bounding_box()
    shot(page, f"chart-range-{width}-{'zh' if chinese else 'en'}")
    chart.locator("[data-range='24h']").click()
    page.wait_for_url("**/?window=day")
    page.wait_for_selector("[data-chart-drawn='24h']")
    expect(page.locator("#totals")).to_contain_text("最近 1 天" if chinese else "last day")
    expect(chart.locator("[data-range='24h']")).to_have_attribute("aria-pressed", "true")
    expect(chart).to_have_attribute("data-chart-ymin", "0,0,0")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
