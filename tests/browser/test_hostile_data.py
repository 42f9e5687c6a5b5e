"""Stored HTML and JavaScript stay inert on every page that shows them, and a page of another
origin cannot use the operator's session to open the console's live socket."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote

import pytest

from tests.support.server import free_port

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


def payload(field: str) -> str:
    """Markup that, if it ever ran, would name the field it came from."""
    return f"<img src=x onerror=\"window.__pwned='{field}'\"><script>window.__pwned='{field}'</script>"


def test_it_shows_markup_in_every_stored_field_as_text_on_every_page(page: Any, console: Console) -> None:
    api = console.api
    biz = api.post("/api/v1/biz", json={"name": "xssline", "title": payload("biz-title"),
                                        "description": payload("biz-description")})
    assert biz.status_code == 201, biz.text
    topic = api.post("/api/v1/topics", json={"topic": "xss.everywhere", "biz": "xssline", "owner": payload("owner"),
                                             "description": payload("description")})
    assert topic.status_code == 201, topic.text
    producer_token = console.server.manage("createtoken", "--scope", "admin", "--name", payload("token-name")).strip()
    with console.server.client(console.url, producer_token) as producer:
        stored = producer.post("/api/v1/messages", json={"messages": [
            {"topic": "xss.everywhere", "group": "g", "key": payload("key"), "dedup_key": payload("dedup"),
             "headers": {payload("header-name"): payload("header-value")}, "data": {payload("data-key"): payload("data")},
             "retry_count": 0} for _ in range(1)] + [
            {"topic": "xss.everywhere", "group": "held", "data": payload("held"), "key": payload("held-key")}]})
        assert stored.status_code == 201, stored.text
    failed_id, held_id = (m["id"] for m in stored.json()["messages"])
    console.consume("xss.everywhere", "g", "FAIL", payload("log"), consumer="host-x:1:c")
    held = api.post("/api/v1/pull", json={"topic": "xss.everywhere", "group": "held", "consumer": "host-y:1:c"})
    assert [m["id"] for m in held.json()["messages"]] == [held_id]
    # Names (topic, group, consumer id) cannot hold markup at all: they are refused.
    for body in ({"topic": payload("topic"), "data": 1}, {"topic": "xss.everywhere", "group": payload("group"), "data": 1}):
        assert api.post("/api/v1/messages", json={"messages": [body]}).status_code == 400
    refused = api.post("/api/v1/pull", json={"topic": "xss.everywhere", "group": "g", "consumer": payload("consumer")})
    assert refused.status_code == 400

    login(page, console)
    biz_id = biz.json()["id"]
    pages = {
        "topics": "/topics/", "topic": "/topics/xss.everywhere/", "group": "/topics/xss.everywhere/groups/g/",
        "biz-list": "/biz/", "biz": f"/biz/{biz_id}/", "messages": "/messages/?topic=xss.everywhere",
        "failed": f"/messages/{failed_id}/", "held": f"/messages/{held_id}/", "dead": "/dead/",
        "in-flight": "/in-flight/", "tokens": "/tokens/", "audit": "/audit/", "registry": "/registry/",
        "reflected-filter": f"/messages/?key={quote(payload('filter'))}",
        "reflected-add": f"/messages/add/?topic={quote(payload('add'))}",
    }
    for name, path in pages.items():
        page.goto(f"{console.url}{path}")
        page.wait_for_load_state("networkidle")
        assert page.evaluate("window.__pwned") is None, f"markup ran on the {name} page"
        assert page.locator("main img[src=x], main script").count() == 0, f"markup became elements on the {name} page"
    page.goto(f"{console.url}/messages/{failed_id}/")
    text = page.inner_text("main")
    for field in ("key", "header-name", "header-value", "data-key", "data", "log", "token-name"):
        # The part without double quotes (JSON shows those escaped) is there, as text.
        assert f"<script>window.__pwned='{field}'</script>" in text, f"{field} is not shown as the text it is"
    shot(page, "hostile-every-field")


EVIL_PAGE = """<!doctype html><title>not the console</title><script>
const seen = [];
const socket = new WebSocket("%(ws)s/ws/console/dashboard");
socket.onopen = () => seen.push("open");
socket.onmessage = () => { seen.push("message"); window.__outcome = {seen: seen, code: null}; };
socket.onclose = (event) => { window.__outcome = {seen: seen, code: event.code}; };
</script>"""


class _EvilPage(BaseHTTPRequestHandler):
    html = b""

    def do_GET(self) -> None:  # http.server's name
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(self.html)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_page_on_another_origin_cannot_open_the_console_socket_with_the_victims_cookie(
    page: Any, console: Console
) -> None:
    ws = console.url.replace("http://", "ws://")
    _EvilPage.html = (EVIL_PAGE % {"ws": ws}).encode()
    evil = ThreadingHTTPServer(("127.0.0.1", free_port()), _EvilPage)
    threading.Thread(target=evil.serve_forever, daemon=True).start()
    try:
        login(page, console)
        # The console's own page opens the socket with the same cookie and gets the live part.
        page.goto(f"{console.url}/")
        own = page.evaluate("""(url) => new Promise((resolve) => {
            const socket = new WebSocket(url);
            socket.onmessage = () => { socket.close(); resolve("message"); };
            socket.onclose = (event) => resolve("closed " + event.code);
        })""", f"{ws}/ws/console/dashboard")
        assert own == "message"

        # Another port of the same host is same-site: the browser sends the session cookie.
        page.goto(f"http://127.0.0.1:{evil.server_address[1]}/")
        page.wait_for_function("window.__outcome !== undefined")
        outcome = page.evaluate("window.__outcome")
        assert outcome["seen"] == [], outcome
    finally:
        evil.shutdown()
        evil.server_close()
