"""A real console for the browser: a broker process on its own MariaDB database, a real
Celery worker for bulk jobs, and headless Chromium (Debian's package) driven by Playwright."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from tests.support.server import ROOT, BrokerServer, free_port, start_celery_worker, stop_processes

REDIS_INDEX_URL = os.environ.get("MQ_CONSOLE_TEST_REDIS", "redis://127.0.0.1:6379/4")
SCREENSHOTS = ROOT / "test-output" / "screenshots"
CHROMIUM = os.environ.get("MQ_CHROMIUM", "/usr/bin/chromium")
PASSWORD = "browser-test-password-42"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]

CREATE_USERS = f"""
from django.contrib.auth.models import User
from mqcenter.models import ConsoleGrant
User.objects.create_superuser("root", "root@example.org", "{PASSWORD}")
olga = User.objects.create_user("olga", "olga@example.org", "{PASSWORD}")
ConsoleGrant.objects.create(user=olga, role="operator")
"""


class Console:
    """The running console: its URL, an API client with an admin token, and helpers."""

    def __init__(self, server: BrokerServer, url: str) -> None:
        self.server, self.url = server, url
        self.api = server.client(url)

    def produce(self, topic: str, items: list[dict[str, Any]]) -> list[int]:
        response = self.api.post("/api/v1/messages", json={"messages": [{"topic": topic, **i} for i in items]})
        assert response.status_code == 201, response.text
        return [m["id"] for m in response.json()["messages"]]

    def consume(self, topic: str, group: str, status: str, log: str, *, expect: int = 1, consumer: str = "host-a:1:c") -> list[int]:
        """Pull (long-poll) and ack every message it gets with `status`; returns the ids."""
        done: list[int] = []
        deadline = time.monotonic() + 60
        while len(done) < expect and time.monotonic() < deadline:
            pulled = self.api.post("/api/v1/pull", json={"topic": topic, "group": group, "consumer": consumer,
                                                         "max_messages": 100, "wait_seconds": 5})
            assert pulled.status_code == 200, pulled.text
            ids = [m["id"] for m in pulled.json()["messages"]]
            if ids:
                acked = self.api.post("/api/v1/ack", json={"consumer": consumer, "results": [
                    {"id": i, "status": status, "log": log} for i in ids]})
                assert acked.status_code == 200, acked.text
                done += ids
        assert len(done) >= expect, f"consumed {len(done)} of {expect}"
        return done


@pytest.fixture(scope="session")
def console() -> Iterator[Console]:
    port = free_port()
    server = BrokerServer("console_browser", extra_env={
        "REDIS_URL": REDIS_INDEX_URL, "CELERY_BROKER_URL": REDIS_INDEX_URL,
        "MQ_REDRIVE_SYNC_LIMIT": "20", "MQ_ADVERTISED_URL": f"http://127.0.0.1:{port}",
        "MQ_ALARM_WEBHOOK_HOSTS": "127.0.0.1:*",  # the tests' own webhook servers, any port
    })
    server.setup()
    server.manage("shell", "-c", CREATE_USERS)
    worker_log = open(ROOT / "var" / "console-browser-celery.log", "ab")  # noqa: SIM115
    worker = start_celery_worker(server.env, worker_log, level="info")
    try:
        url = server.start(port)
        yield Console(server, url)
    finally:
        stop_processes([worker])
        worker_log.close()
        server.teardown()


# Per module, not per session: Playwright's sync API keeps an event loop running in the main
# thread while it is open, which breaks later tests that call asyncio.run().
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any, console: Console) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.csp_errors = []  # type: ignore[attr-defined]
    page.on("console", lambda m: page.csp_errors.append(m.text) if "Content Security Policy" in m.text else None)
    page.on("dialog", lambda dialog: dialog.accept())
    yield page
    assert page.csp_errors == [], page.csp_errors
    context.close()


@contextmanager
def page_at(browser: Any, width: int, locale: str = "en-US") -> Iterator[Any]:
    """A page of a fresh context `width` px wide (a phone's height at 390) in `locale`;
    confirmation dialogs are accepted."""
    context = browser.new_context(viewport={"width": width, "height": 900 if width > 390 else 844}, locale=locale)
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.on("dialog", lambda dialog: dialog.accept())
    yield page
    context.close()


def login(page: Any, console: Console, username: str = "root") -> None:
    page.goto(f"{console.url}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{console.url}/")


def shot(page: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def healthy(url: str) -> bool:
    return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
