"""The console in Simplified Chinese in headless Chromium: a zh-CN browser gets Chinese
navigation, dashboard and chart labels; the header's button switches to English and back."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import Console, login, shot

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

# Words that stay as they are in Chinese: the product, statuses, the other language's name,
# and data (the user, broker URLs).
KEPT = {
    "mq",
    "center",
    "new",
    "fail",
    "timeout",
    "expired",
    "utc",
    "broker",
    "url",
    "http",
    "english",
    "root",
    "admin",
}


@pytest.fixture
def zh_page(browser: Any, console: Console) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1440, "height": 900}, locale="zh-CN")
    page = context.new_page()
    page.set_default_timeout(20_000)
    errors: list[str] = []
    page.on(
        "console", lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None
    )
    yield page
    assert errors == [], errors
    context.close()


def english_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[A-Za-z]{3,}", text) if w.lower() not in KEPT}


def test_it_renders_the_navigation_dashboard_and_chart_in_chinese(
    zh_page: Any, console: Console
) -> None:
    page = zh_page
    page.goto(f"{console.url}/login/")
    assert page.locator("h1").inner_text() == "登录 MQ Center"
    login(page, console)
    page.wait_for_selector("[data-chart-drawn='1h']")
    assert page.locator("html").get_attribute("lang") == "zh-hans"
    nav = page.locator("header.top").inner_text()
    assert "仪表盘" in nav and "死信" in nav and "退出登录" in nav
    assert english_words(nav) == set(), nav
    main = page.locator("main").inner_text()
    assert "积压排行" in main and "生产" in page.locator(".chart-counters .u-legend").inner_text()
    # Names are data, not labels: other tests of this console leave topics and groups behind.
    names: set[str] = set()
    for topic in console.api.get("/api/v1/topics").json():
        names |= english_words(topic["topic"]) | {w for g in topic["groups"] for w in english_words(g["group"])}
    assert english_words(main) - names == set(), english_words(main) - names
    shot(page, "dashboard-zh-1440")

    page.locator("#lang-switch button[value='en']").click()
    page.wait_for_selector("[data-chart-drawn='1h']")
    assert "Dashboard" in page.locator("header.top").inner_text()
    page.locator("#lang-switch button[value='zh-hans']").click()
    page.wait_for_selector("[data-chart-drawn='1h']")
    assert "仪表盘" in page.locator("header.top").inner_text()
