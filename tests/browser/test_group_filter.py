"""An admin sets a group's subscription filter on its console page in headless Chromium against
a real broker, at 1440 px: tags, then an expression that does not parse, answered inline with
the parser's position and what was typed kept; in English and in Chinese."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import Console, login, page_at, shot

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

BAD = "tag = 'paid' region = 'eu'"  # AND missing: the parser stops at `region`, position 13


@pytest.fixture(scope="module")
def tagged_bills(console: Console) -> None:
    response = console.api.post(
        "/api/v1/topics",
        json={"topic": "tagged-bills", "groups": [{"group": "ledger"}, {"group": "archive"}]},
    )
    assert response.status_code == 201, response.text


def filter_of(console: Console, group: str) -> Any:
    return console.api.get(f"/api/v1/topics/tagged-bills/groups/{group}").json()["filter"]


def submit_bad_expression(page: Any) -> Any:
    page.select_option("#gf-kind", "expression")
    page.fill("#gf-expr", BAD)
    page.locator("#group-filter-form button[type=submit]").click()
    error = page.locator("#gf-expr-error")
    expect(error).to_contain_text("found 'region' at position 13")  # the parser's own message
    expect(error.locator("mark")).to_have_text("r")  # the character it stopped at
    expect(page.locator("#gf-expr")).to_have_value(BAD)  # what was typed stays
    expect(page.locator("#gf-expr")).to_have_attribute("aria-invalid", "true")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    return error


def test_an_admin_sets_a_filter_and_a_bad_expression_is_refused_inline(
    browser: Any, console: Console, tagged_bills: None
) -> None:
    with page_at(browser, 1440) as page:
        login(page, console)
        page.goto(f"{console.url}/topics/tagged-bills/groups/ledger/")
        form = page.locator("#group-filter-form")
        expect(form).to_contain_text("A filter change applies to messages published afterwards")
        page.select_option("#gf-kind", "tags")
        page.fill("#gf-tags", "paid, created")
        form.get_by_role("button", name="Save filter").click()
        expect(page.locator("#flash")).to_contain_text("Saved the filter of group ledger")
        cell = page.locator('#group-table tr[data-group="ledger"] .group-filter')
        expect(cell).to_contain_text("tags: created, paid")
        expect(page.locator("#gf-tags")).to_have_value("created, paid")
        assert filter_of(console, "ledger") == {"tags": ["created", "paid"]}

        console.produce("tagged-bills", [{"data": {"n": 1}, "tag": "shipped"}])
        page.reload()
        expect(cell).to_contain_text("1 publish skipped")

        error = submit_bad_expression(page)
        expect(error).to_contain_text("The expression does not parse:")
        assert filter_of(console, "ledger") == {"tags": ["created", "paid"]}  # nothing changed
        shot(page, "group-filter-error-1440")


def test_the_filter_forms_help_and_error_are_in_chinese(
    browser: Any, console: Console, tagged_bills: None
) -> None:
    with page_at(browser, 1440, "zh-CN") as page:
        login(page, console)
        page.goto(f"{console.url}/topics/tagged-bills/groups/archive/")
        form = page.locator("#group-filter-form")
        expect(form).to_contain_text("筛选条件的更改只对之后发布的消息生效")
        expect(form.get_by_role("button", name="保存筛选条件")).to_be_visible()
        error = submit_bad_expression(page)
        expect(error).to_contain_text("表达式无法解析")
        expect(error).to_contain_text("位置 13")
        expect(error).to_contain_text("从 0 开始计数")
        assert filter_of(console, "archive") is None
        shot(page, "group-filter-error-zh-1440")
