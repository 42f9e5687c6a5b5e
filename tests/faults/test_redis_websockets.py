"""WebSockets across a Redis outage: the console's live pages keep updating (they read the
database, not Redis), and SDK wake-up sockets get wake-ups again once Redis returns."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from websockets.sync.client import ClientConnection, connect

from tests.support.private import PrivateRedis
from tests.support.server import BrokerServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

PASSWORD = "outage-pass-0451"  # a throwaway test user


def console_session(url: str) -> str:
    """Log in to the console as a superuser; answers the Cookie header for the socket."""
    with httpx.Client(base_url=url, timeout=10) as client:
        form = client.get("/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
        assert token, "no CSRF token on the login page"
        answer = client.post("/login/", data={
            "username": "root", "password": PASSWORD, "csrfmiddlewaretoken": token.group(1),
        }, headers={"Referer": f"{url}/login/"})
        assert answer.status_code == 302, answer.text[:500]
        return "; ".join(f"{name}={value}" for name, value in client.cookies.items())


def ws_url(url: str, path: str) -> str:
    return "ws://" + url.split("://", 1)[1] + path


def frame_within(socket: ClientConnection, seconds: float) -> str | None:
    try:
        return str(socket.recv(timeout=seconds))
    except TimeoutError:
        return None


def frame_matching(socket: ClientConnection, wanted: str, seconds: float) -> str | None:
    deadline = time.monotonic() + seconds
    while (remaining := deadline - time.monotonic()) > 0:
        frame = frame_within(socket, remaining)
        if frame is not None and wanted in frame:
            return frame
    return None


def test_console_live_pages_keep_updating_through_a_redis_outage(redis_server: PrivateRedis) -> None:
    server = BrokerServer("wsredis_console", extra_env={"REDIS_URL": redis_server.url}).setup()
    server.manage("shell", "-c", "from django.contrib.auth.models import User; "
                  f"User.objects.create_superuser('root', 'root@example.org', '{PASSWORD}')")
    try:
        url = server.start()
        with server.client(url) as api:
            produced = api.post("/api/v1/messages", json={"messages": [{"topic": "live", "data": {"n": 1}}]})
            message_id = produced.json()["messages"][0]["id"]
            cookie = console_session(url)
            with connect(ws_url(url, f"/ws/console/messages/{message_id}"),
                         additional_headers={"Cookie": cookie, "Origin": url}) as socket:
                assert "NEW" in (frame_within(socket, 10) or ""), "no first frame"

                redis_server.stop()
                pulled = api.post("/api/v1/pull", json={"topic": "live", "consumer": "c1"})
                assert [m["id"] for m in pulled.json()["messages"]] == [message_id]
                during = frame_matching(socket, "RUNNING", 10)

                redis_server.start()
                time.sleep(2)
                acked = api.post("/api/v1/ack", json={"consumer": "c1", "results": [
                    {"id": message_id, "status": "SUCCESS"}]})
                assert acked.json()["results"][0]["outcome"] == "success"
                after = frame_matching(socket, "SUCCESS", 10)

        assert during is not None, "the live message page stopped updating while Redis was down"
        assert after is not None, "the live message page did not update after Redis returned"
    finally:
        server.teardown()


@contextmanager
def subscribe(url: str, token: str, topic: str) -> Iterator[ClientConnection]:
    with connect(ws_url(url, "/ws/v1/consumer"), additional_headers={"Authorization": f"Bearer {token}"}) as socket:
        socket.send(json.dumps({"subscribe": [{"topic": topic, "group": "default"}]}))
        answer: dict[str, Any] = json.loads(socket.recv(timeout=10))
        assert answer["type"] == "subscribed", answer
        yield socket


def wake_after_produce(socket: ClientConnection, api: httpx.Client, topic: str, seconds: float) -> float | None:
    """Produce through the other broker until this socket hears a wake-up; seconds taken."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        assert api.post("/api/v1/messages", json={"messages": [{"topic": topic, "data": 1}]}).status_code == 201
        frame = frame_within(socket, 1.0)
        if frame is not None and json.loads(frame).get("type") == "wake":
            return time.monotonic() - started
    return None


def test_sdk_wake_sockets_hear_other_brokers_again_when_redis_returns(redis_server: PrivateRedis) -> None:
    """Produce on broker B, listen on broker A: the wake-up can only travel through Redis."""
    server = BrokerServer("wsredis_wake", extra_env={"REDIS_URL": redis_server.url}).setup()
    try:
        listener_url, producer_url = server.start(), server.start()
        with server.client(producer_url) as api, subscribe(listener_url, server.token, "wake") as socket:
            before = wake_after_produce(socket, api, "wake", 10)

            redis_server.stop()
            time.sleep(1)
            # Produce keeps working; the socket stays open (there is just no one to relay).
            assert api.post("/api/v1/messages", json={"messages": [{"topic": "wake", "data": 2}]}).status_code == 201
            frame_within(socket, 1.0)

            redis_server.start()
            after = wake_after_produce(socket, api, "wake", 30)

        assert before is not None and before < 2, "no wake-up across brokers before the outage"
        assert after is not None, "wake-ups across brokers did not come back with Redis"
        print(f"\nwake across brokers: {before:.3f}s before the outage, {after:.1f}s to return after it")
    finally:
        server.teardown()
