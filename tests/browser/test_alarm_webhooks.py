"""An alarm webhook set up and tested from the topic page in headless Chromium at 390 px:
the form takes a Slack target, and its "Send test alarm" button queues a test alarm that the
broker's outbound worker posts to a real local server; the page shows the outcome by itself."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.webhook_server import WebhookServer

from .conftest import Console, login, shot
from .test_layout import OVERFLOW_JS

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


def test_it_saves_a_webhook_and_sends_a_test_alarm_from_the_topic_page(
    browser: Any, console: Console
) -> None:
    response = console.api.post("/api/v1/topics", json={"topic": "hooked"})
    assert response.status_code == 201, response.text
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    page.set_default_timeout(20_000)
    errors: list[str] = []
    page.on(
        "console", lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None
    )
    with WebhookServer(reply=b"ok") as server:
        login(page, console)
        page.goto(f"{console.url}/topics/hooked/")
        page.fill("input[aria-label='new webhook URL']", server.url("/services/T0/B0/secret"))
        page.select_option("select[aria-label='format of the new webhook']", "slack")
        page.click("#topic-form button[type=submit]:has-text('Save')")
        page.wait_for_selector(".flash.success")
        button = page.locator("button.webhook-test")
        assert button.count() == 1
        assert page.evaluate(OVERFLOW_JS) == []
        shot(page, "topic-webhooks-390")
        button.click()
        page.wait_for_selector(".flash.success:has-text('queued')")
        # The page re-reads the test's outcome until the worker has sent it.
        page.wait_for_selector("#webhook-tests .badge.s-SUCCESS", timeout=60_000)
        [body] = server.bodies("/services/T0/B0/secret")
        assert body["text"].startswith("[MQ Center] Test alarm on topic hooked")
    assert errors == []
    context.close()
