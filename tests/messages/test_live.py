"""The live WebSockets of the dashboard and the message page (Channels, real Redis-free
in-process communicator; the browser test covers them end to end)."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from asgiref.sync import async_to_sync
from asgiref.testing import ApplicationCommunicator
from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.test import Client

from messages import consumers
from messages.delivery.produce import messages_produce
from messages.delivery.validation import produce_item
from messages.models import Status
from mqcenter.core.auth import Principal
from mqcenter.routing import websocket_urlpatterns
from tests.support.console import add_message, make_user
from topics.models import Biz, Topic, TopicGroup

ADMIN = Principal(name="test", scopes=("admin",), biz_ids=None)


class WebsocketCommunicator(ApplicationCommunicator):
    """channels.testing's communicator without its daphne import (daphne is not installed)."""

    def __init__(self, app: Any, path: str) -> None:
        path, _, query = path.partition("?")
        super().__init__(
            app,
            {
                "type": "websocket",
                "path": path,
                "query_string": query.encode(),
                "headers": [],
                "subprotocols": [],
            },
        )

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


async def _talk(path: str, user: Any, *, change: Any = None, until: str = "") -> list[str]:
    """The socket's first frame and, after `change`, the first frame holding `until` (frames
    that changed only the page's clock come in between; 10 s deadline)."""
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
        deadline = time.monotonic() + 10
        frames.append(await communicator.receive_from(timeout=10))
        while until not in frames[-1] and time.monotonic() < deadline:
            frames[-1] = await communicator.receive_from(
                timeout=max(0.1, deadline - time.monotonic())
            )
    await communicator.disconnect()
    return frames


def test_it_pushes_dashboard_updates_to_a_viewer(transactional_db: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(consumers, "LIVE_SECONDS", 0.2)
    shop = Biz.objects.create(name="shop")
    Topic.objects.create(name="orders", biz=shop)
    viewer = make_user("vera", "viewer", shop)

    async def produce() -> None:  # through the service, which reports it to the live counters
        await database_sync_to_async(messages_produce)(
            principal=ADMIN, items=[produce_item({"topic": "orders", "data": 1}, "m")]
        )

    frames = async_to_sync(_talk)(
        "/ws/console/dashboard", viewer, change=produce, until='id="total-NEW">1<'
    )
    assert 'id="total-NEW">0<' in frames[0]
    assert 'id="total-NEW">1<' in frames[1] and 'id="total-produced">1<' in frames[1]


def test_it_refuses_the_live_socket_to_anonymous_and_roleless_users(transactional_db: Any) -> None:
    assert async_to_sync(_talk)("/ws/console/dashboard", AnonymousUser()) == ["closed:4403"]
    nobody = make_user("nobody")
    assert async_to_sync(_talk)("/ws/console/dashboard", nobody) == ["closed:4403"]


def test_it_pushes_a_messages_trace_and_hides_other_lines(
    transactional_db: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr(consumers, "LIVE_SECONDS", 0.2)
    shop, other = Biz.objects.create(name="shop"), Biz.objects.create(name="other")
    Topic.objects.create(name="orders", biz=shop)
    message = add_message("orders", Status.FAIL, data='{"x":"<script>"}')
    frames = async_to_sync(_talk)(
        f"/ws/console/messages/{message.id}", make_user("vera", "viewer", shop)
    )
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
    assert (
        async_to_sync(open_from)(b"http://mq.example.com:9999") is False
    )  # another port, same host
    assert async_to_sync(open_from)(b"https://evil.example") is False
    assert async_to_sync(open_from)(b"") is False


# --- the live counters behind those pages --------------------------------------------------


def _counts_become(
    expected: dict[str, int], pair: tuple[str, str] = ("orders", "billing")
) -> dict[str, int]:
    """The live counters of `pair` once they equal `expected` (the push runs every
    PUSH_SECONDS in the background), polled with a deadline."""
    from messages.stats.flush import backlog_live as live_counts

    deadline = time.monotonic() + 5
    while True:
        counts = live_counts()[0].get(pair, {})
        if counts == expected or time.monotonic() > deadline:
            return counts
        time.sleep(0.05)


def test_it_counts_produces_claims_and_acks_as_they_commit(transactional_db: Any) -> None:
    from django.utils import timezone

    from messages.delivery.acks import AckResult, messages_ack
    from messages.delivery.claims import messages_claim
    from messages.stats.live import live_flow, live_reset

    Topic.objects.create(name="orders", biz=Biz.objects.create(name="shop"), retry_count=0)
    live_reset(snapshot={}, at=timezone.now())  # as the flush job would, on an empty table
    messages_produce(
        principal=ADMIN,
        items=[
            produce_item({"topic": "orders", "group": "billing", "data": n}, "m") for n in range(3)
        ],
    )
    assert _counts_become({"new": 3, "running": 0, "dead": 0}) == {
        "new": 3,
        "running": 0,
        "dead": 0,
    }
    claim = messages_claim(
        principal=ADMIN, topic="orders", group="billing", consumer="c-1", max_messages=2
    )
    assert _counts_become({"new": 1, "running": 2, "dead": 0}) == {
        "new": 1,
        "running": 2,
        "dead": 0,
    }
    first, second = claim.messages
    messages_ack(
        principal=ADMIN,
        consumer="c-1",
        results=[AckResult(first.id, "SUCCESS"), AckResult(second.id, "FAIL")],
    )
    assert _counts_become({"new": 1, "running": 0, "dead": 1}) == {
        "new": 1,
        "running": 0,
        "dead": 1,
    }
    flow = live_flow(since=timezone.now() - timedelta(minutes=5))
    assert (
        sum(v["produced"] for v in flow.values()) == 3
        and sum(v["acked"] for v in flow.values()) == 1
    )


def test_the_flush_job_sets_the_counters_from_the_database(transactional_db: Any) -> None:
    from messages.stats.flush import stats_flush
    from messages.stats.live import live_counts

    Topic.objects.create(name="orders", biz=Biz.objects.create(name="shop"))
    TopicGroup.objects.create(topic=Topic.objects.get(name="orders"), name="billing")
    for status in (
        Status.NEW,
        Status.NEW,
        Status.RUNNING,
        Status.FAIL,
        Status.TIMEOUT,
        Status.SUCCESS,
    ):
        add_message("orders", status)  # straight into the table: no live move reported
    stats_flush()
    counts, as_of = live_counts()
    assert counts[("orders", "billing")] == {"new": 2, "running": 1, "dead": 2}
    assert as_of is not None


def test_reading_the_dashboard_does_not_count_the_message_table(transactional_db: Any) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from messages.stats.live import live_reset
    from mqcenter.dashboard import dashboard_summary

    Topic.objects.create(name="orders", biz=Biz.objects.create(name="shop"))
    add_message("orders", Status.NEW)
    live_reset(
        snapshot={("orders", "billing"): {"deliverable": 1, "delayed": 0, "running": 0, "dead": 0}},
        at=timezone.now(),
    )
    with CaptureQueriesContext(connection) as queries:
        summary = dashboard_summary(principal=ADMIN)
    assert summary["totals"]["new"] == 1
    assert not [
        q["sql"]
        for q in queries.captured_queries
        if "`mq_message`" in q["sql"] or '"mq_message"' in q["sql"]
    ]


def test_a_reader_counts_again_when_no_flush_job_set_the_counters(transactional_db: Any) -> None:
    from messages.stats.flush import backlog_live as live_counts

    Topic.objects.create(name="orders", biz=Biz.objects.create(name="shop"))
    TopicGroup.objects.create(topic=Topic.objects.get(name="orders"), name="billing")
    add_message("orders", Status.NEW)
    counts, as_of = live_counts()  # the autouse fixture cleared them: nothing set them yet
    assert (
        counts[("orders", "billing")] == {"new": 1, "running": 0, "dead": 0} and as_of is not None
    )


def test_it_pushes_a_topics_live_counts_only_inside_its_business_line(
    transactional_db: Any, monkeypatch: Any
) -> None:
    from django.utils import timezone

    from messages.stats.live import live_reset

    monkeypatch.setattr(consumers, "LIVE_SECONDS", 0.2)
    shop, other = Biz.objects.create(name="shop"), Biz.objects.create(name="other")
    TopicGroup.objects.create(topic=Topic.objects.create(name="orders", biz=shop), name="billing")
    live_reset(snapshot={}, at=timezone.now())

    async def produce() -> None:
        item = produce_item({"topic": "orders", "group": "billing", "data": {"x": "<script>"}}, "m")
        await database_sync_to_async(messages_produce)(principal=ADMIN, items=[item])

    from channels.db import database_sync_to_async

    viewer = make_user("vera", "viewer", shop)
    frames = async_to_sync(_talk)(
        "/ws/console/topics/orders?group=billing", viewer, change=produce, until="status=NEW\">1<"
    )
    row = '<tr data-group="billing"><td>billing</td><td class="num live-new"><a href="/messages/?topic=orders&amp;group=billing&amp;status=NEW">'
    assert row + "0<" in frames[0]
    assert row + "1<" in frames[1]
    assert async_to_sync(_talk)(
        "/ws/console/topics/orders", make_user("otto", "viewer", other)
    ) == ["closed:4404"]
    assert async_to_sync(_talk)("/ws/console/topics/orders", AnonymousUser()) == ["closed:4403"]
