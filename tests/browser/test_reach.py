"""Actions in reach at 1,440 and 390 px: a dead-letter group's "Redrive N" and "Delete", a
topic's group row's Replay and Delete, and the messages list's last column are on screen
without scrolling anything sideways; long text is cut with the whole value on hover."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import Console, login, page_at, shot
from .test_layout import ON_SCREEN_JS

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

TOPIC = "reach-with-a-rather-long-topic-name"
GROUP = "a-consumer-group-with-a-long-name"
LONG_LOG = ("upstream refused the request: " + "the inventory service answered with a very long explanation " * 6).strip()


@pytest.fixture(scope="module")
def dead_group(console: Console) -> None:
    response = console.api.post("/api/v1/topics", json={"topic": TOPIC, "retry_count": 0, "groups": [
        {"group": GROUP}, {"group": "second-group-with-another-long-name"}]})
    assert response.status_code == 201, response.text
    console.produce(TOPIC, [{"group": GROUP, "key": f"key-{i}", "data": {"text": "payload " * 30, "n": i}} for i in range(3)])
    console.consume(TOPIC, GROUP, "FAIL", LONG_LOG, expect=3)


@pytest.fixture(params=[(1440, "en-US"), (390, "en-US"), (1440, "zh-CN"), (390, "zh-CN")],
                ids=lambda p: f"{p[0]}px-{p[1]}")
def sized_page(request: Any, browser: Any, console: Console) -> Iterator[Any]:
    with page_at(browser, *request.param) as page:
        yield page


def on_screen(element: Any) -> bool:
    """On screen once the page is scrolled down to it (vertically only: scrolling sideways,
    the page's or a table's, is what an operator should not need)."""
    element.evaluate("el => window.scrollTo(0, el.getBoundingClientRect().top + window.scrollY - 200)")
    return bool(element.evaluate(ON_SCREEN_JS))


def fits(page: Any, selector: str) -> bool:
    """The table is no wider than its scrolling container: nothing hides past its edge."""
    return page.locator(f".table-wrap:has({selector})").evaluate("el => el.scrollWidth <= el.clientWidth + 1")


def test_it_keeps_a_dead_letter_groups_actions_on_screen(sized_page: Any, console: Console, dead_group: None) -> None:
    page = sized_page
    width = page.viewport_size["width"]
    login(page, console)
    page.goto(f"{console.url}/dead/?topic={TOPIC}")
    row = page.locator("#dead-table tr.dead-group")
    assert row.count() == 1
    shot(page, f"reach-dead-letters-{width}-{page.evaluate('navigator.language')}")
    for button in (row.locator("button.dead-redrive"), row.locator("form[action*='/delete/'] button")):
        assert on_screen(button), f"{button.inner_text()} is off screen at {width} px"
    reason = row.locator(".dead-reason")
    assert reason.get_attribute("title") == reason.inner_text() or reason.get_attribute("title").startswith("upstream refused")
    if width == 1440:
        assert fits(page, "#dead-table"), "the dead-letter table scrolls sideways at 1440 px"


def test_it_keeps_a_group_rows_replay_and_delete_on_screen(sized_page: Any, console: Console, dead_group: None) -> None:
    page = sized_page
    width = page.viewport_size["width"]
    login(page, console)
    page.goto(f"{console.url}/topics/{TOPIC}/")
    row = page.locator(f"#group-table tr[data-group='{GROUP}']")
    shot(page, f"reach-topic-groups-{width}-{page.evaluate('navigator.language')}")
    for name in ("replay", "delete"):
        link = row.locator(f"a.button[href*='/{name}/']")
        assert on_screen(link), f"{name} is off screen at {width} px"
    if width == 1440:
        assert fits(page, "#group-table"), "the group table scrolls sideways at 1440 px"


def test_it_shows_the_messages_last_log_without_scrolling_at_1440(sized_page: Any, console: Console, dead_group: None) -> None:
    page = sized_page
    width = page.viewport_size["width"]
    login(page, console)
    page.goto(f"{console.url}/messages/?topic={TOPIC}")
    table = page.locator("#message-table")
    assert table.locator("tbody tr").count() == 3
    shot(page, f"reach-messages-{width}-{page.evaluate('navigator.language')}")
    log = table.locator("tbody tr .last-log").first
    assert log.get_attribute("title") == LONG_LOG  # the whole log on hover
    if width == 1440:
        assert fits(page, "#message-table"), "the messages table scrolls sideways at 1440 px"
    # At 390 px each message is a card: its id, status and last log are all on screen.
    first = table.locator("tbody tr").first
    for cell in (first.locator("td.num a").first, first.locator(".badge"), log):
        assert on_screen(cell), f"{cell.inner_text()} is off screen at {width} px"
