"""The pages an operator watches most (dashboard, topic, group, dead letters, maintenance) at
1,440 and 390 px: nothing scrolls sideways, each page's first action is on screen, and the
screenshots in docs/console.md are taken from here (test-output/screenshots/console-*.png)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import Console, login, shot
from .test_layout import OVERFLOW_JS

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

PAGES = {
    "dashboard": "/",
    "topic": "/topics/invoices/",
    "group": "/topics/invoices/groups/billing/",
    "dead-letters": "/dead/",
    "maintenance": "/maintenance/",
}


@pytest.fixture(scope="module")
def invoices(console: Console) -> None:
    response = console.api.post("/api/v1/topics", json={"topic": "invoices", "retry_count": 0,
                                                         "groups": [{"group": "billing"}, {"group": "archive"}]})
    assert response.status_code == 201, response.text
    console.produce("invoices", [{"data": {"invoice": i, "amount": i * 7}} for i in range(5)])
    console.consume("invoices", "billing", "FAIL", "payment gateway refused invoice 17: card expired", expect=5)
    console.produce("invoices", [{"data": {"invoice": i, "amount": i * 7}} for i in range(5, 30)])
    console.consume("invoices", "billing", "SUCCESS", "ok", expect=25)


@pytest.fixture(params=[1440, 390], ids=lambda w: f"{w}px")
def sized_page(request: Any, browser: Any, console: Console) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": request.param, "height": 900 if request.param > 390 else 844})
    page = context.new_page()
    page.set_default_timeout(20_000)
    yield page
    context.close()


@pytest.mark.parametrize("name", list(PAGES))
def test_it_shows_the_page_without_sideways_scrolling(sized_page: Any, console: Console, invoices: None, name: str) -> None:
    page = sized_page
    width = page.viewport_size["width"]
    login(page, console)
    page.goto(f"{console.url}{PAGES[name]}")
    if page.locator("[data-chart-src]").count():
        page.wait_for_selector("[data-chart-drawn]")
    assert page.evaluate(OVERFLOW_JS) == []
    page.screenshot(path=str(shot_path(name, width)))
    shot(page, f"console-{name}-{width}-full")


def shot_path(name: str, width: int) -> Any:
    from .conftest import SCREENSHOTS

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS / f"console-{name}-{width}.png"
