"""No dead ends, at 1,440 and 390 px: a move to a mistyped topic is refused beside the
Move button with the selection and the typed target kept; a dead-letter group's "list" shows
that group's messages only (its reason kept); a group redrive returns to the filtered
dead-letter page."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import Console, login, page_at, shot

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

TOPIC = "ends"


@pytest.fixture(scope="module")
def two_reasons(console: Console) -> None:
    """ends/billing: three dead letters "card declined" and two "address unknown"."""
    response = console.api.post("/api/v1/topics", json={"topic": TOPIC, "retry_count": 0,
                                                         "groups": [{"group": "billing"}]})
    assert response.status_code == 201, response.text
    console.produce(TOPIC, [{"group": "billing", "data": {"n": i}} for i in range(3)])
    console.consume(TOPIC, "billing", "FAIL", "card declined", expect=3)
    console.produce(TOPIC, [{"group": "billing", "data": {"n": i}} for i in range(3, 5)])
    console.consume(TOPIC, "billing", "FAIL", "address unknown", expect=2)


@pytest.fixture(params=[1440, 390], ids=lambda w: f"{w}px")
def sized_page(request: Any, browser: Any, console: Console) -> Iterator[Any]:
    with page_at(browser, request.param) as page:
        yield page


def test_it_refuses_a_move_to_a_mistyped_topic_beside_the_button_keeping_everything(
    sized_page: Any, console: Console, two_reasons: None,
) -> None:
    page = sized_page
    width = page.viewport_size["width"]
    login(page, console)
    page.goto(f"{console.url}/messages/?topic={TOPIC}&status=FAIL")
    boxes = page.locator("#message-table tbody input[name=ids]")
    expect(boxes).to_have_count(5)
    picked = [boxes.nth(0).get_attribute("value"), boxes.nth(2).get_attribute("value")]
    boxes.nth(0).check()
    boxes.nth(2).check()
    page.fill("#bulk-form input[name=to_topic]", "ednss")
    page.fill("#bulk-form input[name=to_group]", "billing")
    page.click("#bulk-form button[value=move]")
    error = page.locator("#bulk-error")
    expect(error).to_contain_text("ednss")
    shot(page, f"dead-ends-move-{width}")
    expect(page.locator("#bulk-form input[name=to_topic]")).to_have_value("ednss")
    expect(page.locator("#bulk-form input[name=to_topic]")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#bulk-form input[name=to_group]")).to_have_value("billing")
    checked = [b.get_attribute("value") for b in page.locator("#message-table tbody input[name=ids]:checked").all()]
    assert sorted(checked) == sorted(picked)
    expect(page.locator("#message-table tbody tr")).to_have_count(5)  # the filter is kept too
    # Nothing moved.
    for message_id in picked:
        assert console.api.get(f"/api/v1/messages/{message_id}").json()["topic"] == TOPIC


def test_it_lists_one_dead_letter_group_and_returns_to_the_filtered_page_after_its_redrive(
    sized_page: Any, console: Console, two_reasons: None,
) -> None:
    page = sized_page
    width = page.viewport_size["width"]
    login(page, console)
    page.goto(f"{console.url}/dead/?topic={TOPIC}")
    declined = page.locator("#dead-table tr.dead-group", has_text="card declined")
    expect(declined.locator(".dead-count")).to_have_text("3")
    declined.locator("a.dead-list").click()
    page.wait_for_url(re.compile(r".*/messages/\?.*reason=card.*"))
    expect(page.locator("#message-table tbody tr")).to_have_count(3)  # not the two others
    expect(page.locator("#message-table")).not_to_contain_text("address unknown")
    expect(page.locator("#reason-group")).to_contain_text("card declined")
    shot(page, f"dead-ends-group-list-{width}")
    page.go_back()
    if width == 1440:  # the redrive itself once (at 390 px, run last): both widths share the messages
        return
    page.locator("#dead-table tr.dead-group", has_text="card declined").locator("button.dead-redrive").click()
    page.wait_for_url(f"{console.url}/dead/?topic={TOPIC}")
    expect(page.locator("#flash")).to_contain_text("Redrove 3 dead letters")
    expect(page.locator("#dead-table tr.dead-group")).to_have_count(1)
    expect(page.locator("input[name=topic]").first).to_have_value(TOPIC)
