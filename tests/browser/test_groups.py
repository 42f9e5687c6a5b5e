"""An admin manages a topic's groups in headless Chromium against a real broker: creates one
from `earliest`, pauses it, fixes a refused limit inline, and deletes it after confirming."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import Console, login, shot

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


@pytest.fixture(scope="module")
def shipments(console: Console) -> None:
    response = console.api.post(
        "/api/v1/topics", json={"topic": "shipments", "groups": [{"group": "labels"}]}
    )
    assert response.status_code == 201, response.text
    console.produce(
        "shipments", [{"data": {"parcel": 1}}, {"data": {"parcel": 2}}]
    )  # published to `labels`


def test_it_creates_pauses_limits_and_deletes_a_group_on_the_topic_page(
    page: Any, console: Console, shipments: None
) -> None:
    login(page, console)
    page.goto(f"{console.url}/topics/shipments/")
    page.fill("#gc-name", "tracking")
    page.select_option("#gc-mode", "sharded")
    page.select_option("#gc-start", "earliest")
    page.click("#group-create-form button[type=submit]")
    expect(page.locator("#flash")).to_contain_text("Created group tracking")
    row = page.locator('#group-table tr[data-group="tracking"]')
    expect(row.locator("td").nth(2)).to_have_text("sharded")
    # The history, replayed from earliest, is counted live at once.
    expect(page.locator('#live-counts tr[data-group="tracking"] .live-new')).to_have_text("2")

    row.get_by_role("button", name="Pause", exact=True).click()
    expect(page.locator("#flash")).to_contain_text("Paused group tracking")
    expect(row.locator("td").nth(3)).to_contain_text("paused")
    expect(row.get_by_role("button", name="Resume", exact=True)).to_be_visible()

    row.get_by_role("link", name="Limits").click()
    form = page.locator("#group-limits-form")
    page.fill("#gl-mif", "0")
    form.get_by_role("button", name="Save limits").click()
    expect(form.locator(".errorlist")).to_contain_text("max_in_flight must be between 1 and")
    expect(page.locator("#gl-mif")).to_have_value("0")  # what was typed stays
    expect(page.locator("#gl-mif")).to_have_attribute("aria-invalid", "true")
    assert (
        console.api.get("/api/v1/topics/shipments/groups/tracking").json()["max_in_flight"] is None
    )
    shot(page, "group-limits-error")
    page.fill("#gl-mif", "7")
    form.get_by_role("button", name="Save limits").click()
    expect(page.locator("#flash")).to_contain_text("Saved the limits of group tracking")
    expect(row.locator("td").nth(4)).to_have_text("7")
    state = console.api.get("/api/v1/topics/shipments/groups/tracking").json()
    assert state["max_in_flight"] == 7 and state["paused"] is True and state["mode"] == "sharded"
    shot(page, "topic-groups")

    row.get_by_role("link", name="Delete…").click()
    confirm = page.locator("#group-delete-form")
    expect(confirm).to_contain_text("Delete group tracking of shipments?")
    expect(confirm).to_contain_text("2 waiting messages are removed")
    assert (
        console.api.get("/api/v1/topics/shipments/groups/tracking").status_code == 200
    )  # asking changed nothing
    confirm.get_by_role("button", name="Delete group tracking").click()
    expect(page.locator("#flash")).to_contain_text(
        "Deleted group tracking of topic shipments; 2 waiting messages removed"
    )
    expect(page.locator('#group-table tr[data-group="tracking"]')).to_have_count(0)
    expect(page.locator('#group-table tr[data-group="labels"]')).to_have_count(1)
    assert console.api.get("/api/v1/topics/shipments/groups/tracking").status_code == 404
