"""Forms show every field's error at once, at 1,440 and 390 px: a schedule with a bad cron,
an unknown time zone and broken JSON reports all three (the cron's range said precisely);
group limits of -3 and "abc" report both; a cron's next five runs are previewed in its time
zone as it is typed, in English and Chinese."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import Console, login, page_at, shot

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


@pytest.fixture(scope="module")
def limits_topic(console: Console) -> None:
    response = console.api.post("/api/v1/topics", json={"topic": "every-error", "groups": [{"group": "workers"}]})
    assert response.status_code == 201, response.text


@pytest.fixture(params=[(1440, "en-US"), (390, "en-US"), (1440, "zh-CN")], ids=lambda p: f"{p[0]}px-{p[1]}")
def sized_page(request: Any, browser: Any, console: Console) -> Iterator[Any]:
    with page_at(browser, *request.param) as page:
        yield page


def test_it_reports_every_field_of_a_schedule_at_once(sized_page: Any, console: Console) -> None:
    page = sized_page
    width = page.viewport_size["width"]
    login(page, console)
    page.goto(f"{console.url}/schedules/")
    page.fill("#s-name", f"nightly-{width}")
    page.fill("#s-topic", "reports")
    page.fill("#s-cron", "61 * * * *")
    page.fill("#s-tz", "Mars/Olympus_Mons")
    page.fill("#s-data", '{"broken": ')
    page.click("#schedule-form button[type=submit]")
    expect(page.locator("#s-cron-error")).to_contain_text("minute 61 is out of range")
    expect(page.locator("#s-cron-error")).to_contain_text("0 to 59")
    expect(page.locator("#s-tz-error")).to_contain_text("Mars/Olympus_Mons")
    expect(page.locator("#s-data-error")).to_be_visible()
    shot(page, f"every-error-schedule-{width}-{page.evaluate('navigator.language')}")
    for field in ("#s-cron", "#s-tz", "#s-data"):
        expect(page.locator(field)).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#s-cron")).to_have_value("61 * * * *")  # what was typed stays
    assert "nightly" not in page.locator("#schedules").inner_text()  # nothing was created


def test_it_previews_a_crons_next_five_runs_in_its_time_zone_as_it_is_typed(sized_page: Any, console: Console) -> None:
    page = sized_page
    width = page.viewport_size["width"]
    chinese = page.evaluate("navigator.language").startswith("zh")
    login(page, console)
    page.goto(f"{console.url}/schedules/")
    preview = page.locator("#cron-preview")
    expect(preview.locator("li")).to_have_count(5)  # the form's default cron, at once
    page.fill("#s-tz", "Asia/Shanghai")
    page.fill("#s-cron", "30 9 * * 1-5")
    expect(preview).to_contain_text("Asia/Shanghai")
    expect(preview.locator("li")).to_have_count(5)
    runs = preview.locator("li").all_inner_texts()
    assert all(" 09:30 " in f"{r} " and "UTC+0800" in r for r in runs), runs
    assert not any(day in " ".join(runs) for day in ("Sat", "Sun", "星期六", "星期日")), runs
    expect(preview).to_contain_text("接下来的运行" if chinese else "Next runs")
    page.fill("#s-cron", "61 * * * *")
    expect(preview).to_contain_text("minute 61 is out of range")
    expect(preview.locator("li")).to_have_count(0)
    shot(page, f"every-error-cron-preview-{width}-{'zh' if chinese else 'en'}")


def test_it_reports_both_bad_group_limits_at_once(sized_page: Any, console: Console, limits_topic: None) -> None:
    page = sized_page
    chinese = page.evaluate("navigator.language").startswith("zh")
    login(page, console)
    page.goto(f"{console.url}/topics/every-error/groups/workers/limits/")
    page.fill("#gl-mif", "-3")
    page.fill("#gl-rate", "abc")
    page.locator("#group-limits-form button[type=submit]").click()
    errors = page.locator("#group-limits-form .errorlist")
    expect(errors).to_have_count(2)
    text = " ".join(errors.all_inner_texts())
    if not chinese:
        assert "max_in_flight must be between 1 and" in text and "rate_per_second must be a number" in text, text
    expect(page.locator("#gl-mif")).to_have_value("-3")
    expect(page.locator("#gl-rate")).to_have_value("abc")
    state = console.api.get("/api/v1/topics/every-error/groups/workers").json()
    assert state["max_in_flight"] is None and state["rate_per_second"] is None
