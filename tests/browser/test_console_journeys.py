"""The operator's main journeys in headless Chromium against a real broker and Celery worker.
Screenshots of each page go to test-output/screenshots/."""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import Console, login, shot

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


@pytest.fixture(scope="module")
def topics(console: Console) -> None:
    for body in ({"topic": "orders", "retry_count": 0, "groups": [{"group": "billing"}]},
                 {"topic": "bulk", "retry_count": 0, "groups": [{"group": "default"}]}):
        response = console.api.post("/api/v1/topics", json=body)
        assert response.status_code == 201, response.text


def test_it_finds_a_failed_message_by_key_edits_redrives_and_watches_it_succeed(
    page: Any, console: Console, topics: None,
) -> None:
    console.produce("orders", [{"group": "billing", "key": "other-1", "data": {"order": 41}}])
    console.consume("orders", "billing", "SUCCESS", "ok", expect=1)  # other-1 succeeds...
    [message_id] = console.produce("orders", [{"group": "billing", "key": "cust-7", "data": {"order": 42, "card": "<b>x</b>"}}])
    # ...and cust-7 fails for good (no retries on this topic)
    failed = console.consume("orders", "billing", "FAIL", "card declined: expired", expect=1, consumer="host-b:2:c")
    assert failed == [message_id]

    login(page, console)
    page.click("nav >> text=Dead letters")
    assert "card declined: expired" in page.inner_text("#dead-table")
    shot(page, "dead-letters")
    page.click("nav >> text=Messages")
    page.fill("input[name=key]", "cust-7")
    page.select_option("select[name=status]", "FAIL,TIMEOUT,EXPIRED")
    page.click("form.filters button[type=submit]")
    page.wait_for_url(re.compile(r".*key=cust-7.*"))  # HTMX pushed the filter into the URL
    row_link = page.locator(f"#message-table a[href='/messages/{message_id}/']")
    row_link.wait_for()
    assert page.locator("#message-table tbody tr").count() == 1
    shot(page, "messages-filtered")
    row_link.click()

    page.wait_for_url(f"{console.url}/messages/{message_id}/")
    assert page.inner_text("#message-status") == "FAIL"
    timeline = page.inner_text("#trace")
    assert "Produced" in timeline and "Pulled" in timeline and "card declined: expired" in timeline
    assert "rank" in timeline or "host-b:2:c" in timeline
    assert "<b>x</b>" in page.inner_text("#message-data")  # shown as text, not markup
    shot(page, "message-detail-failed")

    page.fill("#e-data", '{"order": 42, "card": "renewed"}')
    page.click("#edit-form button[type=submit]")
    page.wait_for_selector("text=Saved message")
    assert '"renewed"' in page.inner_text("#message-data")

    page.click("#redrive-btn")
    page.wait_for_selector("text=is queued again")
    assert page.inner_text("#message-status") == "NEW"

    # A consumer takes it and succeeds while the operator watches: the page updates live.
    worker = threading.Thread(target=console.consume, args=("orders", "billing", "SUCCESS", "charged"),
                              kwargs={"expect": 1, "consumer": "host-c:3:c"})
    worker.start()
    expect(page.locator("#message-status")).to_have_text("SUCCESS", timeout=30_000)
    worker.join(timeout=60)
    assert "charged" in page.inner_text("#trace")
    assert "Redriven" in page.inner_text("#trace") and "Edited" in page.inner_text("#trace")
    shot(page, "message-detail-succeeded")


def test_it_redrives_a_whole_filter_in_the_background_with_a_progress_bar(
    page: Any, console: Console, topics: None,
) -> None:
    console.produce("bulk", [{"data": {"n": i}} for i in range(45)])
    console.consume("bulk", "default", "FAIL", "downstream 503", expect=45, consumer="host-d:4:c")

    login(page, console)
    page.goto(f"{console.url}/messages/?topic=bulk&status=FAIL,TIMEOUT")
    shot(page, "messages-bulk-filter")
    page.click("#filter-bulk button[value=redrive]")  # confirm dialog accepted by the fixture
    page.wait_for_url(re.compile(r".*/jobs/\d+/$"))
    assert page.locator("#job-progress").count() == 1
    shot(page, "job-progress")
    page.wait_for_selector("#job-result", timeout=60_000)  # polled by HTMX, worked by Celery
    assert "Done: redrive of 45 messages" in page.inner_text("#job-result")
    assert page.get_attribute("#job-progress", "value") == "100"
    shot(page, "job-done")
    page.goto(f"{console.url}/messages/?topic=bulk&status=NEW")
    assert page.locator("#message-table tbody tr").count() == 45


def test_it_updates_the_dashboard_live_when_messages_are_produced(page: Any, console: Console, topics: None) -> None:
    login(page, console)
    page.wait_for_selector("[data-live-status].live-on")
    before = int(page.inner_text("#total-NEW"))
    console.produce("orders", [{"group": "billing", "data": {"live": i}} for i in range(3)])
    expect(page.locator("#total-NEW")).to_have_text(str(before + 3), timeout=30_000)
    shot(page, "dashboard")


def _heartbeat(console: Console) -> None:
    response = console.api.post("/api/v1/registry/consumers", json={
        "consumer": "host-e:5:c", "subscriptions": [{"topic": "orders", "group": "billing"}]})
    assert response.status_code == 200, response.text


def test_it_renders_every_page(page: Any, console: Console, topics: None) -> None:
    _heartbeat(console)
    login(page, console)
    pages = {
        "topics": "/topics/", "topic-edit": "/topics/orders/", "topic-new": "/topics/+new/",
        "registry": "/registry/", "jobs": "/jobs/", "business-lines": "/biz/",
        "users": "/users/", "audit": "/audit/", "message-add": "/messages/add/", "password": "/password/",
        "messages": "/messages/",
    }
    for name, path in pages.items():
        _heartbeat(console)  # stay online (heartbeats are 2 s apart in this server)
        response = page.goto(f"{console.url}{path}")
        assert response.status == 200, path
        shot(page, name)
    _heartbeat(console)
    page.goto(f"{console.url}/registry/")
    assert "host-e:5:c" in page.inner_text("#consumer-table")
    assert page.locator("#broker-table tbody tr td.mono").count() >= 1
    page.goto(f"{console.url}/tokens/")
    page.fill("#k-name", "svc-orders")
    page.fill("#k-scopes", "produce:orders*")
    page.click("#token-form button[type=submit]")
    secret = page.inner_text("#token-secret")
    assert secret.startswith("mq_")
    shot(page, "tokens-created")
    page.goto(f"{console.url}/audit/")
    assert "token.create" in page.inner_text("#audit-table")


def test_it_shows_an_operator_no_admin_pages_and_reads_without_javascript(browser: Any, console: Console, topics: None) -> None:
    context = browser.new_context(viewport={"width": 1366, "height": 768}, java_script_enabled=False)
    page = context.new_page()
    login(page, console, "olga")
    nav = page.inner_text("header nav")
    assert "Messages" in nav and "Tokens" not in nav and "Users" not in nav
    page.click("nav >> text=Messages")  # links keep href: reading works without JavaScript
    page.fill("input[name=topic]", "orders")
    page.click("form.filters button[type=submit]")
    page.wait_for_url(re.compile(r".*topic=orders.*"))
    assert page.locator("#message-table tbody tr").count() >= 1
    assert page.goto(f"{console.url}/tokens/").status == 403
    context.close()
