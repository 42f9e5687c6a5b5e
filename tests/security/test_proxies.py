"""Proxy headers (X-Forwarded-For, X-Forwarded-Proto) are believed only from MQ_TRUSTED_PROXIES,
whichever server runs the broker: the Django test client, `manage.py runbroker`, plain uvicorn
(which by default believes them from 127.0.0.1 before Django runs)."""

from __future__ import annotations

import re
import sys
import uuid
from collections.abc import Iterator

import httpx
import pytest
from django.test import Client, override_settings

from mqcenter.core.login_throttle import MAX_FAILURES_PER_ADDRESS
from tests.support.server import BrokerServer

THROTTLED = b"Too many failed logins"


def fresh_address() -> str:
    return "10." + ".".join(str(b) for b in uuid.uuid4().bytes[:3])


@pytest.mark.django_db
def test_an_untrusted_peer_cannot_choose_the_address_it_is_throttled_under() -> None:
    peer = fresh_address()
    answers = [
        Client().post("/login/", {"username": f"u-{uuid.uuid4().hex[:8]}", "password": "x"},
                      REMOTE_ADDR=peer, HTTP_X_FORWARDED_FOR=fresh_address()).content
        for _ in range(MAX_FAILURES_PER_ADDRESS + 2)
    ]
    assert THROTTLED in answers[-1] and THROTTLED not in answers[0]


@pytest.mark.django_db
def test_a_trusted_proxy_is_believed_for_the_client_behind_it() -> None:
    proxy = fresh_address()
    with override_settings(MQ_TRUSTED_PROXIES=[proxy]):
        answers = [
            Client().post("/login/", {"username": f"u-{uuid.uuid4().hex[:8]}", "password": "x"},
                          REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR=f"{fresh_address()}, {proxy}").content
            for _ in range(MAX_FAILURES_PER_ADDRESS + 2)
        ]
    assert not any(THROTTLED in a for a in answers)


@pytest.mark.django_db
@override_settings(SECURE_SSL_REDIRECT=True)
@pytest.mark.parametrize("server_believed_it", [False, True])
def test_an_untrusted_x_forwarded_proto_does_not_skip_the_https_redirect(server_believed_it: bool) -> None:
    # server_believed_it: the server in front of Django already made the scheme https from the
    # header (plain uvicorn does for 127.0.0.1).
    response = Client().get("/login/", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_PROTO="https",
                            secure=server_believed_it)
    assert response.status_code == 301 and response["Location"].startswith("https://")


@pytest.mark.django_db
@override_settings(SECURE_SSL_REDIRECT=True, MQ_TRUSTED_PROXIES=["10.20.0.0/16"])
def test_a_trusted_proxys_x_forwarded_proto_is_believed() -> None:
    response = Client().get("/login/", REMOTE_ADDR="10.20.3.4", HTTP_X_FORWARDED_PROTO="https")
    assert response.status_code == 200


@override_settings(MQ_TRUSTED_PROXIES=["10.0.0.0/8"])
def test_the_client_is_the_rightmost_hop_that_is_not_a_trusted_proxy() -> None:
    from mqcenter.core.proxies import forwarded_client

    assert forwarded_client("10.0.0.1", "6.6.6.6, 1.2.3.4, 10.0.0.7") == "1.2.3.4"
    assert forwarded_client("10.0.0.1", None) == "10.0.0.1"
    assert forwarded_client("10.0.0.1", "10.0.0.9") == "10.0.0.9"


class PlainUvicorn(BrokerServer):
    """The broker served by `uvicorn mqcenter.asgi:application` with uvicorn's own defaults."""

    def command(self, port: int) -> list[str]:
        return [sys.executable, "-m", "uvicorn", "mqcenter.asgi:application", "--port", str(port),
                "--lifespan", "on", "--log-level", "warning"]


@pytest.fixture(scope="module")
def plain_uvicorn() -> Iterator[str]:
    server = PlainUvicorn("proxies").setup()
    try:
        yield server.start()
    finally:
        server.teardown()


@pytest.mark.e2e
def test_under_plain_uvicorn_x_forwarded_for_from_localhost_does_not_escape_the_address_limit(
    plain_uvicorn: str,
) -> None:
    answers = []
    for _ in range(MAX_FAILURES_PER_ADDRESS + 5):
        with httpx.Client(base_url=plain_uvicorn, timeout=30) as browser:
            form = browser.get("/login/")
            csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
            assert csrf, form.text[:300]
            answers.append(browser.post(
                "/login/",
                data={"username": f"u-{uuid.uuid4().hex[:8]}", "password": "x", "csrfmiddlewaretoken": csrf.group(1)},
                headers={"X-Forwarded-For": fresh_address(), "Referer": f"{plain_uvicorn}/login/"},
            ).content)
    assert any(THROTTLED in a for a in answers)
