"""In headless Chromium against a real broker: a refused edit keeps what was typed, and
the dashboard follows produces and acks within 2 seconds."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import Console, login, shot

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


def test_it_keeps_an_edit_with_invalid_json_and_shows_the_error_beside_it(
    page: Any, console: Console
) -> None:
    [message_id] = console.produce("forms", [{"data": {"order": 7}}])
    login(page, console)
    page.goto(f"{console.url}/messages/{message_id}/")
    typed = '{"order": 8, "note": "<i>unfinished"'
    page.fill("#e-data", typed)
    page.fill("#e-retries", "3")
    page.click("#edit-form button[type=submit]")
    expect(page.locator("#e-data-error")).to_contain_text("data must be valid JSON")
    assert page.input_value("#e-data") == typed
    assert page.input_value("#e-retries") == "3"
    assert page.get_attribute("#e-data", "aria-invalid") == "true"
    assert '"order": 7' in page.inner_text("#message-data")  # nothing was saved
    shot(page, "message-edit-invalid-json")


def _number(page: Any, selector: str) -> int:
    return int(page.inner_text(selector).strip())


def _within_2s(locator: Any, text: str) -> None:
    """Polls the live page (Playwright's expect) with a 2-second deadline, counted from now:
    just after the produce or ack returned."""
    expect(locator).to_have_text(text, timeout=2_000)


def test_it_shows_a_produce_and_an_ack_on_the_dashboard_within_2_seconds(
    page: Any, console: Console
) -> None:
    console.api.post("/api/v1/topics", json={"topic": "live", "groups": [{"group": "billing"}]})
    login(page, console)
    expect(page.locator("[data-live-status].live-on")).to_be_visible()  # the socket is open
    waiting, produced = _number(page, "#total-NEW"), _number(page, "#total-produced")
    acked = _number(page, "#total-consumed")

    console.produce("live", [{"group": "billing", "data": {"n": 1}}])
    _within_2s(page.locator("#total-NEW"), str(waiting + 1))
    _within_2s(page.locator("#total-produced"), str(produced + 1))
    shot(page, "dashboard-live-after-produce")

    console.consume("live", "billing", "SUCCESS", "done", expect=1)
    _within_2s(page.locator("#total-consumed"), str(acked + 1))
    _within_2s(page.locator("#total-NEW"), str(waiting))


def test_it_shows_a_produce_and_an_ack_on_the_topic_and_group_pages_within_2_seconds(
    page: Any, console: Console
) -> None:
    console.api.post(
        "/api/v1/topics",
        json={"topic": "livetopic", "groups": [{"group": "billing"}, {"group": "audit"}]},
    )
    login(page, console)
    for url in ("/topics/livetopic/", "/topics/livetopic/groups/billing/"):
        page.goto(f"{console.url}{url}")
        row = page.locator("#live-counts tr[data-group=billing]")
        expect(row).to_be_visible()
        expect(page.locator("[data-live-status].live-on")).to_be_visible()
        waiting, acked = (
            _number(page, "#live-counts tr[data-group=billing] .live-new"),
            _number(page, "#live-counts tr[data-group=billing] .live-acked"),
        )
        console.produce("livetopic", [{"group": "billing", "data": {"n": 2}}])
        _within_2s(row.locator(".live-new"), str(waiting + 1))
        console.consume("livetopic", "billing", "SUCCESS", "done", expect=1)
        _within_2s(row.locator(".live-acked"), str(acked + 1))
        _within_2s(row.locator(".live-new"), str(waiting))
    shot(page, "group-live-after-ack")
