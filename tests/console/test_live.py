"""The live WebSockets of the dashboard and the message page (Channels, real Redis-free
in-process communicator; the browser test covers them end to end)."""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from asgiref.testing import ApplicationCommunicator
from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.test import Client

from messages import consumers
from messages.models import Status
from mqcenter.routing import websocket_urlpatterns
from topics.models import Biz, Topic

from .conftest import add_message, make_user


class WebsocketCommunicator(ApplicationCommunicator):
    """channels.testing's communicator without its daphne import (daphne is not installed)."""

    def __init__(self, app: Any, path: str) -> None:
        super().__init__(app, {"type": "websocket", "path": path, "query_string": b"", "headers": [],
                               "subprotocols": []})

    async def connect(self, timeout: float = 10) -> tuple[bool, Any]:
        await self.send_input({"type": "websocket.connect"})
        answer = await self.receive_output(timeout)
        if answer["type"] == "websocket.close":
            return False, answer.get("code")
        return True, None

    async def receive_from(self, timeout: float = 10) -> str:
        answer = await self.receive_output(timeout)
        if answer["type"] == "websocket.close":
            return f"closed:{answer.get('code')}"
        assert answer["type"] == "websocket.send", answer
        return answer["text"]

    async def disconnect(self) -> None:
        await self.send_input({"type": "websocket.disconnect", "code": 1000})
        await self.wait(2)


def _app() -> Any:
    from channels.routing import URLRouter

    return URLRouter(websocket_urlpatterns)


def _session_cookie(user: Any) -> list[tuple[bytes, bytes]]:
    """The Cookie header of a signed-in session of `user` (none for an anonymous one): the
    sockets read the session again on every tick."""
    if not user.is_authenticated:
        return []
    client = Client()
    client.force_login(user)
    return [(b"cookie", f"{settings.SESSION_COOKIE_NAME}={client.session.session_key}".encode())]


async def _talk(path: str, user: Any, *, change: Any = None) -> list[str]:
    communicator = WebsocketCommunicator(_app(), path)
    communicator.scope["headers"] = await database_sync_to_async(_session_cookie)(user)
    connected, code = await communicator.connect(timeout=10)
    if not connected:
        return [f"closed:{code}"]
    frames = [await communicator.receive_from(timeout=10)]
    if frames[0].startswith("closed:"):
        return frames
    if change is not None:
        await change()
        frames.append(await communicator.receive_from(timeout=10))
    await communicator.disconnect()
    return frames


def test_it_pushes_dashboard_updates_to_a_viewer(transactional_db: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(consumers, "LIVE_SECONDS", 0.2)
    shop = Biz.objects.create(name="shop")
    Topic.objects.create(name="orders", biz=shop)
    viewer = make_user("vera", "viewer", shop)

    async def produce() -> None:
        await database_sync_to_async(add_message)("orders", Status.NEW)

    frames = async_to_sync(_talk)("/ws/console/dashboard", viewer, change=produce)
    assert 'id="total-NEW">0<' in frames[0]
    assert 'id="total-NEW">1<' in frames[1]


def test_it_refuses_the_live_socket_to_anonymous_and_roleless_users(transactional_db: Any) -> None:
    assert async_to_sync(_talk)("/ws/console/dashboard", AnonymousUser()) == ["closed:4403"]
    nobody = make_user("nobody")
    assert async_to_sync(_talk)("/ws/console/dashboard", nobody) == ["closed:4403"]


def test_it_pushes_a_messages_trace_and_hides_other_lines(transactional_db: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(consumers, "LIVE_SECONDS", 0.2)
    shop, other = Biz.objects.create(name="shop"), Biz.objects.create(name="other")
    Topic.objects.create(name="orders", biz=shop)
    message = add_message("orders", Status.FAIL, data='{"x":"<script>"}')
    frames = async_to_sync(_talk)(f"/ws/console/messages/{message.id}", make_user("vera", "viewer", shop))
    assert 'id="message-status">FAIL<' in frames[0]
    outsider = make_user("otto", "viewer", other)
    assert async_to_sync(_talk)(f"/ws/console/messages/{message.id}", outsider) == ["closed:4404"]


def test_a_console_socket_opens_only_from_a_page_of_this_site(transactional_db: Any) -> None:
    from mqcenter.asgi import console_sockets

    viewer = make_user("vera", "viewer", Biz.objects.create(name="shop"))

    async def open_from(origin: bytes) -> bool:
        communicator = WebsocketCommunicator(console_sockets, "/ws/console/dashboard")
        communicator.scope["headers"] = [(b"host", b"mq.example.com:8000"), (b"origin", origin)]
        communicator.scope["user"] = viewer
        connected, _ = await communicator.connect(timeout=10)
        if connected:
            await communicator.disconnect()
        return connected

    assert async_to_sync(open_from)(b"http://mq.example.com:8000") is True
    assert async_to_sync(open_from)(b"http://mq.example.com:9999") is False  # another port, same host
    assert async_to_sync(open_from)(b"https://evil.example") is False
    assert async_to_sync(open_from)(b"") is False
