"""One fact, one number, at 1,440 and 390 px: a group's page shows its waiting, in-flight and
dead counts once (the live counts), right after a group is created from `earliest`; the
dashboard's dead letters are FAIL, TIMEOUT and EXPIRED, the number its link lists, as on the
dead-letter page and in `mq_queue_dead`."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import Console, login, page_at, shot

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

TOPIC = "tally"
DEAD_TOPIC = "tally-dead"


@pytest.fixture(scope="module")
def history(console: Console) -> None:
    response = console.api.post("/api/v1/topics", json={"topic": TOPIC, "groups": [{"group": "first"}]})
    assert response.status_code == 201, response.text
    console.produce(TOPIC, [{"data": {"n": i}} for i in range(6)])  # published to `first`


@pytest.fixture(scope="module")
def dead_letters(console: Console) -> list[int]:
    """Two FAIL and one EXPIRED dead letter of tally-dead/billing."""
    response = console.api.post("/api/v1/topics", json={"topic": DEAD_TOPIC, "retry_count": 0,
                                                         "groups": [{"group": "billing"}]})
    assert response.status_code == 201, response.text
    failed = console.produce(DEAD_TOPIC, [{"group": "billing", "data": {"n": i}} for i in range(2)])
    console.consume(DEAD_TOPIC, "billing", "FAIL", "declined", expect=2)
    [expiring] = console.produce(DEAD_TOPIC, [{"group": "billing", "data": {"n": 9}, "ttl_seconds": 0.5}])
    expires = time.monotonic() + 0.5
    time.sleep(max(0.0, expires - time.monotonic()) + 0.05)  # its time to live passes undelivered
    # The pull that meets it past its expiry makes it EXPIRED instead of delivering it.
    pulled = console.api.post("/api/v1/pull", json={"topic": DEAD_TOPIC, "group": "billing", "consumer": "host-x:1:c",
                                                    "max_messages": 10, "wait_seconds": 0})
    assert pulled.status_code == 200 and pulled.json()["messages"] == [], pulled.text
    assert console.api.get(f"/api/v1/messages/{expiring}").json()["status"] == "EXPIRED"
    return [*failed, expiring]


@pytest.fixture(params=[1440, 390], ids=lambda w: f"{w}px")
def sized_page(request: Any, browser: Any, console: Console) -> Iterator[Any]:
    with page_at(browser, request.param) as page:
        yield page


def test_it_shows_a_groups_counts_once_and_at_once_after_creating_it_from_earliest(
    sized_page: Any, console: Console, history: None,
) -> None:
    page = sized_page
    width = page.viewport_size["width"]
    group = f"replayed-{width}"
    login(page, console)
    page.goto(f"{console.url}/topics/{TOPIC}/")
    page.fill("#gc-name", group)
    page.select_option("#gc-start", "earliest")
    page.click("#group-create-form button[type=submit]")
    expect(page.locator("#flash")).to_contain_text(f"Created group {group}")
    # The topic page: the group's waiting count is the live one, already the replayed six.
    live = page.locator(f"#live-counts tr[data-group='{group}']")
    expect(live.locator(".live-new")).to_have_text("6")
    headers = [h.strip().lower() for h in page.locator("#group-table thead th").all_inner_texts()]
    assert "backlog" not in headers and "dead" not in headers, headers  # one table counts
    page.goto(f"{console.url}/topics/{TOPIC}/groups/{group}/")
    shot(page, f"one-number-group-{width}")
    tables = page.locator("main table:not(.u-legend)")  # not the charts' legends
    counting = [i for i in range(tables.count())
                if {"waiting", "new", "backlog"} & {h.strip().lower() for h in tables.nth(i).locator("th").all_inner_texts()}]
    assert len(counting) == 1, "the group's waiting messages are counted in more than one table"
    expect(page.locator(f"#live-counts tr[data-group='{group}'] .live-new")).to_have_text("6")
    # Its number links to the messages it counts.
    page.locator(f"#live-counts tr[data-group='{group}'] .live-new a").click()
    page.wait_for_url(f"**/messages/?topic={TOPIC}&group={group}&status=NEW")
    expect(page.locator("#message-table tbody tr")).to_have_count(6)


def test_it_counts_the_dead_letters_its_link_lists(sized_page: Any, console: Console, dead_letters: list[int]) -> None:
    page = sized_page
    width = page.viewport_size["width"]
    login(page, console)
    row = page.locator("#dead tbody tr", has_text=f"{DEAD_TOPIC} / billing")
    expect(row.locator("td.num")).to_have_text("3")
    header = page.locator("#dead thead th.num").inner_text()
    assert "EXPIRED" in header and "FAIL" in header and "TIMEOUT" in header, header
    shot(page, f"one-number-dashboard-{width}")
    row.locator("a").click()
    page.wait_for_url("**/messages/?**")
    expect(page.locator("#message-table tbody tr")).to_have_count(3)
    metrics = console.api.get("/metrics").text
    line = next(li for li in metrics.splitlines()
                if li.startswith("mq_queue_dead{") and f'topic="{DEAD_TOPIC}"' in li) if "mq_queue_dead{" in metrics else ""
    help_line = next(li for li in metrics.splitlines() if li.startswith("# HELP mq_queue_dead "))
    assert "EXPIRED" in help_line, help_line
    assert not line or line.endswith(" 3.0"), line
