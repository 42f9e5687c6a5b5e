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
