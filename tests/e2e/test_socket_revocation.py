"""Long-lived WebSockets lose what their session or token lost, against a real broker: a
console socket closes within 5 s of a sign-out or a removed grant, a consumer socket within
5 s of its token's revocation or narrowing, and a consumer socket hears wakes only of topics
of its own business line, even a topic of a subscribed name that another line creates later."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from tests.support.server import BrokerServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

PASSWORD = "revoke-pass-7731"  # a throwaway test user
CLOSE_WITHIN = 5.0


@pytest.fixture(scope="module")
def broker() -> Iterator[tuple[BrokerServer, str]]:
    server = BrokerServer("revoke").setup()
    server.manage(
        "shell",
        "-c",
        (
            "from django.contrib.auth.models import User; from mqcenter.models import ConsoleGrant; "
            "from topics.models import Biz; shop = Biz.objects.create(name='shop'); "
            f"User.objects.create_superuser('root', 'root@example.org', '{PASSWORD}'); "
            f"viewer = User.objects.create_user('viewer', password='{PASSWORD}'); "
            "ConsoleGrant.objects.create(user=viewer, role='viewer', biz=shop)"
        ),
    )
    try:
        yield server, server.start()
    finally:
        server.teardown()


def sign_in(url: str, username: str) -> httpx.Client:
    client = httpx.Client(base_url=url, timeout=10)
    form = client.get("/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
    assert token, "no CSRF token on the login page"
    answer = client.post(
        "/login/",
        data={"username": username, "password": PASSWORD, "csrfmiddlewaretoken": token.group(1)},
        headers={"Referer": f"{url}/login/"},
    )
    assert answer.status_code == 302, answer.text[:500]
    return client


def cookie_of(client: httpx.Client) -> str:
    return "; ".join(f"{name}={value}" for name, value in client.cookies.items())


def ws_url(url: str, path: str) -> str:
    return "ws://" + url.split("://", 1)[1] + path


def closed_within(socket: ClientConnection, seconds: float) -> int | None:
    """The close code if the server closes the socket within `seconds` (frames before it are
    read and dropped), else None."""
    deadline = time.monotonic() + seconds
    while (remaining := deadline - time.monotonic()) > 0:
        try:
            socket.recv(timeout=remaining)
        except TimeoutError:
            return None
        except ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd is not None else -1
    return None


def test_a_console_socket_closes_within_5_s_of_a_sign_out(broker: tuple[BrokerServer, str]) -> None:
    _, url = broker
    with (
        closing(sign_in(url, "root")) as browser,
        connect(
            ws_url(url, "/ws/console/dashboard"),
            additional_headers={"Cookie": cookie_of(browser), "Origin": url},
        ) as socket,
    ):
        assert socket.recv(timeout=10), "no first frame"
        page = browser.get("/")
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text) or re.search(
            r'"X-CSRFToken": "([^"]+)"', page.text
        )
        token = csrf.group(1) if csrf else browser.cookies["csrftoken"]
        assert browser.post(
            "/logout/", data={"csrfmiddlewaretoken": token}, headers={"Referer": f"{url}/"}
        ).status_code in (200, 302)
        assert closed_within(socket, CLOSE_WITHIN) == 4403


def test_a_console_socket_closes_within_5_s_of_losing_its_grant(
    broker: tuple[BrokerServer, str],
) -> None:
    server, url = broker
    with (
        closing(sign_in(url, "viewer")) as browser,
        connect(
            ws_url(url, "/ws/console/dashboard"),
            additional_headers={"Cookie": cookie_of(browser), "Origin": url},
        ) as socket,
    ):
        assert socket.recv(timeout=10), "no first frame"
        try:
            server.sql("DELETE FROM mq_console_grant")
            assert closed_within(socket, CLOSE_WITHIN) == 4403
        finally:
            server.sql(
                "INSERT INTO mq_console_grant (user_id, role, biz_id, created_at) "
                "SELECT u.id, 'viewer', b.id, UTC_TIMESTAMP() "
                "FROM auth_user u, topics_biz b WHERE u.username = 'viewer' AND b.name = 'shop'"
            )


@contextmanager
def subscribed(url: str, token: str, *topics: str) -> Iterator[ClientConnection]:
    with connect(
        ws_url(url, "/ws/v1/consumer"), additional_headers={"Authorization": f"Bearer {token}"}
    ) as socket:
        socket.send(json.dumps({"subscribe": [{"topic": t, "group": "g"} for t in topics]}))
        answer: dict[str, Any] = json.loads(socket.recv(timeout=10))
        assert answer["type"] == "subscribed", answer
        yield socket


def test_a_consumer_socket_closes_within_5_s_of_its_tokens_revocation(
    broker: tuple[BrokerServer, str],
) -> None:
    server, url = broker
    token = server.manage(
        "createtoken", "--biz", "shop", "--scope", "consume:*", "--name", "revoked"
    ).strip()
    with subscribed(url, token, "orders") as socket:
        server.sql("UPDATE topics_apitoken SET revoked_at = UTC_TIMESTAMP() WHERE name = 'revoked'")
        assert closed_within(socket, CLOSE_WITHIN) == 4401


def test_a_consumer_socket_closes_within_5_s_of_its_tokens_narrowing(
    broker: tuple[BrokerServer, str],
) -> None:
    server, url = broker
    token = server.manage(
        "createtoken", "--biz", "shop", "--scope", "consume:*", "--name", "narrowed"
    ).strip()
    with subscribed(url, token, "orders") as socket:
        server.sql(
            "UPDATE topics_apitoken SET scopes = '[\"consume:audit\"]' WHERE name = 'narrowed'"
        )
        assert closed_within(socket, CLOSE_WITHIN) == 4403


def test_a_consumer_socket_hears_no_wake_of_another_lines_topic_created_later(
    broker: tuple[BrokerServer, str],
) -> None:
    server, url = broker
    mine = server.manage("createtoken", "--biz", "shop", "--scope", "admin").strip()
    theirs = server.manage("createtoken", "--biz", "rival", "--scope", "admin").strip()
    with server.client(url, mine) as shop, server.client(url, theirs) as rival:
        assert (
            shop.post(
                "/api/v1/messages", json={"messages": [{"topic": "mine", "group": "g", "data": 0}]}
            ).status_code
            == 201
        )
        with subscribed(url, mine, "later", "mine") as socket:
            # "later" does not exist when subscribing; the rival line creates it now.
            made = rival.post(
                "/api/v1/messages",
                json={"messages": [{"topic": "later", "group": "g", "data": "x"}]},
            )
            assert made.status_code == 201, made.text
            assert (
                shop.post(
                    "/api/v1/messages",
                    json={"messages": [{"topic": "mine", "group": "g", "data": 1}]},
                ).status_code
                == 201
            )
            # Wakes are published in order: the rival's came first, so it would be heard first.
            first = json.loads(socket.recv(timeout=10))
            assert first == {"type": "wake", "topic": "mine", "group": "g"}


def test_a_consumer_socket_answers_another_lines_topic_as_one_that_does_not_exist(
    broker: tuple[BrokerServer, str],
) -> None:
    server, url = broker
    rival = server.manage("createtoken", "--biz", "rival", "--scope", "admin").strip()
    mine = server.manage("createtoken", "--biz", "shop", "--scope", "consume:*").strip()
    with server.client(url, rival) as client:
        made = client.post("/api/v1/messages", json={"messages": [{"topic": "rivals.secret", "data": 1}]})
        assert made.status_code == 201, made.text
    answers = []
    for topic in ("rivals.secret", "nobody.has.this"):
        with connect(ws_url(url, "/ws/v1/consumer"), additional_headers={"Authorization": f"Bearer {mine}"}) as socket:
            socket.send(json.dumps({"subscribe": [{"topic": topic, "group": "g"}]}))
            answer = json.loads(socket.recv(timeout=10))
            answers.append({**answer, "subscriptions": [{**s, "topic": "?"} for s in answer.get("subscriptions", [])]})
    assert answers[0] == answers[1] == {"type": "subscribed", "subscriptions": [{"topic": "?", "group": "g"}]}
