"""The one door for the broker's outbound HTTP calls (mqcenter/core/outbound.py), against real
servers on 127.0.0.1: a good one, one that drips its answer a byte at a time, one that speaks
another protocol, one that resets, one that redirects, one that answers too much."""

from __future__ import annotations

import socket
import time

import pytest

from mqcenter.core.errors import InvalidRequest
from mqcenter.core.outbound import AllowList, Call, allow_entry_parse, post, post_many, url_check
from tests.support.webhook_server import (
    WebhookServer,
    dripping_server,
    not_http_server,
    reset_server,
)

ANY_LOCAL_PORT = AllowList(["127.0.0.1:*"], setting="MQ_TEST_HOSTS")


def send(url: str, allowed: AllowList = ANY_LOCAL_PORT, deadline: float = 2.0, biz: str | None = None):
    return post(Call(url, {"transaction_id": "t1"}, biz=biz), allowed=allowed, deadline=deadline, user_agent="test")


def test_a_good_target_answers():
    with WebhookServer(reply=b'{"state": "commit"}') as server:
        answer = send(server.url("/check"))
    assert answer.ok and answer.status == 200 and answer.json() == {"state": "commit"}
    assert server.bodies("/check") == [{"transaction_id": "t1"}]
    assert server.received[0]["headers"]["Host"] == server.host  # the name called, not the address


def test_a_dripping_server_is_cut_off_at_the_total_deadline():
    # One byte every 0.5 s: every read is well within any per-read timeout, the whole answer
    # would take ~30 s.
    with dripping_server(every=0.5) as server:
        started = time.monotonic()
        answer = send(server.url(), deadline=1.5)
        took = time.monotonic() - started
    assert not answer.ok and "within 1.5 s" in answer.error
    assert took < 4, took


def test_a_server_of_another_protocol_is_a_failed_call():
    with not_http_server() as server:
        answer = send(server.url())
    assert not answer.ok and answer.status is None and "not a valid HTTP answer" in answer.error


def test_a_reset_connection_is_a_failed_call():
    with reset_server() as server:
        answer = send(server.url())
    assert not answer.ok and answer.error


def test_a_closed_port_is_a_failed_call():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    answer = send(f"http://127.0.0.1:{port}/check")
    assert not answer.ok and "could not connect" in answer.error


def test_a_redirect_is_not_followed():
    with WebhookServer() as elsewhere, WebhookServer(status=302, reply=b"") as server:
        server_headers = {"Location": elsewhere.url("/stolen")}
        server.extra_headers = server_headers
        answer = send(server.url())
    assert not answer.ok and answer.status == 302 and answer.error.startswith("HTTP 302")
    assert elsewhere.received == []


def test_an_answer_over_the_size_cap_is_a_failed_call():
    with WebhookServer(reply=b"x" * (1024 * 1024)) as server:
        answer = send(server.url())
    assert not answer.ok and "larger than" in answer.error


def test_a_non_2xx_answer_is_a_failed_call_with_its_status():
    with WebhookServer(status=503, reply=b"busy") as server:
        answer = send(server.url())
    assert not answer.ok and answer.status == 503 and answer.body == b"busy"


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/check\r\nX-Injected: 1",
        "http://127.0.0.1:9/che ck",
        "http://127.0.0.1:9/\x00",
        "http://127.0.0.1:9/\u00e9",
        "ftp://127.0.0.1:9/check",
        "file:///etc/passwd",
        "gopher://127.0.0.1:9/_",
        "http:///nohost",
        "http://127.0.0.1:99999/",
        "",
        "x" * 2001,
    ],
)
def test_a_url_with_control_characters_or_another_scheme_is_refused_and_never_called(url):
    with pytest.raises(InvalidRequest) as refused:
        url_check(url=url, allowed=ANY_LOCAL_PORT, biz=None, field="check_url", what="check_url")
    assert refused.value.details == {"field": "check_url"}
    answer = send(url)
    assert not answer.ok and answer.status is None


def test_one_broken_target_never_loses_the_others_answers():
    with (
        WebhookServer(reply=b'{"state": "commit"}') as good,
        not_http_server() as broken,
        dripping_server(every=0.5) as slow,
        reset_server() as reset,
    ):
        calls = [
            Call(broken.url(), {}),
            Call("http://127.0.0.1:1/\r\nbad", {}),
            Call(good.url("/a"), {"n": 1}),
            Call(slow.url(), {}),
            Call(reset.url(), {}),
            Call(good.url("/b"), {"n": 2}),
        ]
        started = time.monotonic()
        answers = post_many(calls, allowed=ANY_LOCAL_PORT, deadline=1.5, user_agent="t", per_group=8, overall=8)
        took = time.monotonic() - started
    assert [a.ok for a in answers] == [False, False, True, False, False, True]
    assert answers[2].json() == answers[5].json() == {"state": "commit"}
    assert took < 4, took


def test_one_lines_slow_targets_wait_for_that_lines_slots_only():
    # Line "slow" has 6 calls to a server that holds every answer 1 s, two at a time; line
    # "fast" has one call. Its call starts at once, not after the slow line's waves.
    with WebhookServer(slow=100, delay=1.0) as held, WebhookServer() as fast:
        calls = [Call(held.url(f"/{n}"), {}, biz="slow") for n in range(6)] + [Call(fast.url("/mine"), {}, biz="fast")]
        started = time.monotonic()
        answers = post_many(calls, allowed=ANY_LOCAL_PORT, deadline=5, user_agent="t", per_group=2, overall=4)
    assert all(a.ok for a in answers)
    assert fast.received[0]["at"] - started < 0.8
    arrivals = sorted(r["at"] - started for r in held.received)
    assert arrivals[2] > 0.9 and arrivals[4] > 1.9  # waves of two: the line's own bound


def test_a_host_entry_without_a_port_allows_the_default_port_only():
    allowed = AllowList(["127.0.0.1", "hooks.example.com"], setting="MQ_TEST_HOSTS")
    for url in ("http://127.0.0.1:8080/x", "https://hooks.example.com:8443/x", "http://hooks.example.com:443/x"):
        with pytest.raises(InvalidRequest):
            url_check(url=url, allowed=allowed, biz=None, field="url", what="URL")
    for url in ("http://127.0.0.1/x", "https://hooks.example.com/x", "http://hooks.example.com:80/x"):
        assert url_check(url=url, allowed=allowed, biz=None, field="url", what="URL").url == url


def test_entries_of_one_business_line_serve_that_line_only():
    with WebhookServer() as server:
        allowed = AllowList([f"shop=127.0.0.1:{server.port}"], setting="MQ_TEST_HOSTS")
        assert send(server.url(), allowed, biz="shop").ok
        for other in ("books", None):
            answer = send(server.url(), allowed, biz=other)
            assert not answer.ok and "MQ_TEST_HOSTS" in answer.error
            with pytest.raises(InvalidRequest):
                url_check(url=server.url(), allowed=allowed, biz=other, field="url", what="URL")
    assert len(server.received) == 1


def test_the_allow_list_is_checked_on_the_resolved_address():
    # A listed name that resolves to a loopback address (DNS pointing an allowed name at the
    # broker's own machine) is refused after resolution, before any connection.
    name = socket.gethostname().lower()
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(name, 80, type=socket.SOCK_STREAM)}
    except OSError:
        pytest.skip("this machine's name does not resolve")
    if not all(a.startswith("127.") or a == "::1" for a in addresses) or name == "localhost":
        pytest.skip("this machine's name does not resolve to loopback")
    with WebhookServer() as server:
        by_name = AllowList([f"{name}:*"], setting="MQ_TEST_HOSTS")
        answer = send(f"http://{name}:{server.port}/x", by_name)
        assert not answer.ok and "resolves to" in answer.error and "does not allow" in answer.error
        # A network entry lets the same name through: the address it resolves to is inside.
        by_network = AllowList(["127.0.0.0/8:*"], setting="MQ_TEST_HOSTS")
        assert send(f"http://{name}:{server.port}/y", by_network).ok
        assert send(f"http://localhost:{server.port}/z", AllowList(["localhost:*"], setting="X")).ok
    assert [r["path"] for r in server.received] == ["/y", "/z"]


@pytest.mark.parametrize(
    ("raw", "name", "network", "port", "biz"),
    [
        ("hooks.example.com", "hooks.example.com", None, None, None),
        ("Hooks.Example.com:8443", "hooks.example.com", None, 8443, None),
        ("127.0.0.1:*", None, "127.0.0.1/32", 0, None),
        ("shop=10.1.0.0/16:9000", None, "10.1.0.0/16", 9000, "shop"),
        ("[::1]:8080", None, "::1/128", 8080, None),
        ("[fd00::/8]", None, "fd00::/8", None, None),
    ],
)
def test_allow_list_entries_parse(raw, name, network, port, biz):
    entry = allow_entry_parse(raw)
    assert (entry.name, str(entry.network) if entry.network else None, entry.port, entry.biz) == (name, network, port, biz)


@pytest.mark.parametrize("raw", ["=host", "host:port", "[::1", "host:70000", ":80"])
def test_malformed_allow_list_entries_are_refused(raw):
    with pytest.raises(ValueError):
        allow_entry_parse(raw)
