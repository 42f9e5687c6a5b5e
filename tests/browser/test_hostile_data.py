"""Stored HTML and JavaScript stay inert: a `<script>` in message data never runs."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Console, login, shot

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

SCRIPT = "<script>window.__pwned='data'</script>"
IMAGE = "<img src=x onerror=\"window.__pwned='img'\">"
KEY = "<script>window.__pwned='key'</script>"
LOG = "<svg onload=\"window.__pwned='log'\"></svg> declined"


def test_it_shows_script_in_message_data_as_text_and_never_runs_it(page: Any, console: Console) -> None:
    [message_id] = console.produce("hostile", [{
        "group": "xss", "key": KEY, "data": {"html": SCRIPT, "img": IMAGE},
        "headers": {"note": IMAGE}, "retry_count": 0,
    }])
    console.consume("hostile", "xss", "FAIL", LOG, expect=1, consumer="host-x:1:c")

    login(page, console)
    visited = {
        "list": f"{console.url}/messages/?topic=hostile",
        "detail": f"{console.url}/messages/{message_id}/",
        "dead": f"{console.url}/dead/",
    }
    for name, url in visited.items():
        page.goto(url)
        page.wait_for_load_state("networkidle")
        assert page.evaluate("window.__pwned") is None, f"script ran on the {name} page"
        text = page.inner_text("main")
        if name in ("detail",):
            assert SCRIPT in text  # shown as text, exactly as produced
            assert KEY in text
        if name in ("detail", "dead"):
            assert LOG in text
        shot(page, f"hostile-{name}")
    assert page.locator("main script").count() == 0
    assert page.locator("main img[src=x]").count() == 0
