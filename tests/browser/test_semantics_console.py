"""The console's schedules page and message cancel, in headless Chromium."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Console, login, shot

pytestmark = pytest.mark.browser


def test_it_creates_a_schedule_runs_it_now_and_disables_it(page: Any, console: Console) -> None:
    login(page, console)
    page.click("nav >> text=Schedules")
    page.fill("#s-name", "nightly-sync")
    page.fill("#s-topic", "sync")
    page.fill("#s-cron", "0 2 * * *")
    page.fill("#s-tz", "Asia/Shanghai")
    page.fill("#s-data", '{"full": true}')
    page.click("#schedule-form button[type=submit]")
    row = page.locator("#schedules tr", has_text="nightly-sync")
    assert row.locator(".next-run").inner_text().endswith("18:00 UTC")  # 02:00 in Shanghai
    assert row.locator(".last-run").inner_text() == "never"

    row.locator("text=Run now").click()
    page.wait_for_selector("#schedules tr:has-text('nightly-sync') a[href^='/messages/']")
    assert "UTC" in page.locator("#schedules tr", has_text="nightly-sync").locator(".last-run").inner_text()
    page.locator("#schedules tr", has_text="nightly-sync").locator("text=Disable").click()
    page.wait_for_selector("#schedules tr:has-text('nightly-sync') >> text=disabled")
    assert page.locator("#schedules tr", has_text="nightly-sync").locator(".next-run").inner_text() == "—"
    shot(page, "schedules")

    page.fill("#s-name", "broken")
    page.fill("#s-topic", "sync")
    page.fill("#s-cron", "not a cron")
    page.click("#schedule-form button[type=submit]")
    assert "cron" in page.inner_text("#s-cron-error")  # beside the field, the input kept
    assert page.input_value("#s-cron") == "not a cron" and page.input_value("#s-name") == "broken"


def test_it_cancels_a_delayed_message_from_its_page(page: Any, console: Console) -> None:
    [message_id] = console.produce("later", [{"data": {"n": 1}, "delay_seconds": 3600}])
    login(page, console)
    page.goto(f"{console.url}/messages/{message_id}/")
    assert page.inner_text("#message-status") == "NEW"
    page.click("#cancel-btn")
    page.wait_for_function("document.querySelector('#message-status').innerText === 'CANCELLED'")
    assert page.locator("#cancel-btn").is_disabled()
    assert "Cancelled by user:root" in page.inner_text("#trace")
