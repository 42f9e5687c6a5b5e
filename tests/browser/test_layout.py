"""The console's layout in headless Chromium at 1,440, 1,024 and 390 px: every navigation
link is on screen and clickable (behind the menu button at 390 px), and the messages table
scrolls inside its container instead of being cut (at 390 px each message is a card). Screenshots go to test-output/screenshots/."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import Console, login, shot

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

# The links a global admin must always be able to reach, whatever else the menu holds.
EXPECTED_LINKS = {
    "Dashboard",
    "Messages",
    "Dead letters",
    "Topics",
    "Registry",
    "Schedules",
    "Transactions",
    "Jobs",
    "Business lines",
    "Tokens",
    "Users",
    "Audit",
}
NARROW = 390

# Whether the element's centre is inside the viewport and the element itself (not something
# covering or clipping it) is what a click there would hit.
ON_SCREEN_JS = """el => {
  const r = el.getBoundingClientRect();
  const x = r.left + r.width / 2, y = r.top + r.height / 2;
  if (r.width === 0 || r.left < 0 || r.right > window.innerWidth || y < 0 || y > window.innerHeight) return false;
  const hit = document.elementFromPoint(x, y);
  return hit !== null && (hit === el || el.contains(hit));
}"""

# What sticks out past the right edge of the page (empty when the page does not scroll
# sideways); wide tables are fine inside their scrolling container.
OVERFLOW_JS = """() => {
  if (document.documentElement.scrollWidth <= window.innerWidth) return [];
  const wide = Array.from(document.querySelectorAll("body *"))
    .filter(el => el.getBoundingClientRect().right > window.innerWidth + 1 && !el.closest(".table-wrap"))
    .slice(0, 5).map(el => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (el.className ? "." + el.className : ""));
  return wide.length ? wide : ["the page scrolls sideways"];
}"""


@pytest.fixture(scope="module")
def messages(console: Console) -> None:
    response = console.api.post(
        "/api/v1/topics",
        json={"topic": "layout", "retry_count": 0, "groups": [{"group": "wide-table"}]},
    )
    assert response.status_code == 201, response.text
    console.produce(
        "layout",
        [
            {
                "group": "wide-table",
                "key": f"k-{i}",
                "data": {"text": "a long payload " * 12, "n": i},
            }
            for i in range(5)
        ],
    )


@pytest.fixture(params=[1440, 1024, NARROW], ids=lambda w: f"{w}px")
def sized_page(request: Any, browser: Any, console: Console) -> Iterator[Any]:
    context = browser.new_context(
        viewport={"width": request.param, "height": 844 if request.param == NARROW else 900}
    )
    page = context.new_page()
    page.set_default_timeout(20_000)
    errors: list[str] = []
    page.on(
        "console", lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None
    )
    yield page
    assert errors == [], errors
    context.close()


def open_menu(page: Any) -> None:
    """At narrow widths the links hide behind the menu button; wide layouts have no button."""
    toggle = page.locator("header.top .nav-toggle")
    if page.viewport_size["width"] > NARROW:
        assert not toggle.is_visible()
        return
    assert not page.locator("header.top nav a").first.is_visible()  # collapsed until asked
    assert toggle.get_attribute("aria-expanded") == "false"
    toggle.click()
    assert toggle.get_attribute("aria-expanded") == "true"


def test_it_keeps_every_navigation_link_on_screen_and_clickable(
    sized_page: Any, console: Console
) -> None:
    page = sized_page
    width = page.viewport_size["width"]
    login(page, console)
    links = page.locator("header.top nav a")
    names = [n.strip() for n in links.all_inner_texts()]
    assert set(names) >= EXPECTED_LINKS, names
    hrefs = [links.nth(i).get_attribute("href") for i in range(len(names))]
    open_menu(page)
    shot(page, f"layout-nav-{width}")
    for i, name in enumerate(names):
        assert links.nth(i).evaluate(ON_SCREEN_JS), f"{name} is not on screen at {width} px"
    # The page itself never scrolls sideways: nothing was pushed past the right edge.
    assert page.evaluate(OVERFLOW_JS) == []
    for name, href in zip(names, hrefs, strict=True):
        page.goto(f"{console.url}/")
        open_menu(page)
        page.locator("header.top nav a", has_text=name).first.click()
        page.wait_for_url(f"{console.url}{href}")
        overflow = page.evaluate(OVERFLOW_JS)
        assert overflow == [], f"{href} is wider than {width} px: {overflow}"
    # The account links (password, log out) stay reachable too.
    page.goto(f"{console.url}/")
    open_menu(page)
    assert page.locator("header.top .who a", has_text="Password").evaluate(ON_SCREEN_JS)


def test_it_scrolls_the_messages_table_inside_its_container(
    sized_page: Any, console: Console, messages: None
) -> None:
    page = sized_page
    width = page.viewport_size["width"]
    login(page, console)
    page.goto(f"{console.url}/messages/?topic=layout")
    table = page.locator("#message-table")
    assert table.locator("tbody tr").count() == 5
    shot(page, f"layout-messages-{width}")
    wrap = page.locator(".table-wrap:has(#message-table)")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert wrap.evaluate("el => el.getBoundingClientRect().right <= window.innerWidth")
    if width == NARROW:
        # Each message is a card: nothing to scroll sideways, its last log on screen.
        assert wrap.evaluate("el => el.scrollWidth <= el.clientWidth + 1")
        log = table.locator("tbody tr td[data-label='Last log']").first
        log.evaluate("el => window.scrollTo(0, el.getBoundingClientRect().top + window.scrollY - 200)")
        assert log.evaluate(ON_SCREEN_JS), "the last log cannot be reached at 390 px"
        return
    # Scrolled to its end inside the container, the last column is on screen and not covered.
    wrap.evaluate("el => { el.scrollLeft = el.scrollWidth; }")
    last = table.locator("thead th").last
    assert last.inner_text().strip().lower() == "last log"
    assert last.evaluate(ON_SCREEN_JS), f"the last column cannot be reached at {width} px"
    first_id = table.locator("tbody tr td.num a").first
    wrap.evaluate("el => { el.scrollLeft = 0; }")
    assert first_id.evaluate(ON_SCREEN_JS)


def test_it_shows_the_links_without_javascript_at_narrow_widths(
    browser: Any, console: Console
) -> None:
    context = browser.new_context(
        viewport={"width": NARROW, "height": 844}, java_script_enabled=False
    )
    page = context.new_page()
    login(page, console)
    assert not page.locator(
        "header.top .nav-toggle"
    ).is_visible()  # nothing to open: no script to open it
    links = page.locator("header.top nav a")
    assert {n.strip() for n in links.all_inner_texts()} >= EXPECTED_LINKS
    for i in range(links.count()):
        links.nth(i).scroll_into_view_if_needed()
        assert links.nth(i).evaluate(ON_SCREEN_JS), links.nth(i).inner_text()
    assert page.evaluate(OVERFLOW_JS) == []
    context.close()
