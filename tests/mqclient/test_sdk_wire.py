"""The SDK's keep-alive HTTP (mqclient/wire.py) against real sockets: a broker that drops an
idle connection, one that never answers, one that is not there."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from mqclient.wire import ConnectionPool, HTTPFailure
from tests.mqclient.sdk_fakebroker import free_port

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\": 1}\r\n"


class OneShotServer:
    """Answers one request per connection, keep-alive promised, then closes the connection
    (as a broker restarting or timing out idle connections does)."""

    def __init__(self, answer: bool = True) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        self.answer = answer
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            request = b""
            while b"\r\n\r\n" not in request:
                request += conn.recv(65536)
            if not self.answer:
                time.sleep(2)
            else:
                conn.sendall(ANSWER)
            conn.close()

    def stop(self) -> None:
        self.sock.close()


def test_a_connection_the_broker_closed_while_idle_is_replaced_once():
    server = OneShotServer()
    pool = ConnectionPool({"Accept": "application/json"})
    try:
        for _ in range(3):
            answer = pool.request("POST", server.url + "/x", json={"n": 1}, connect_timeout=1, read_timeout=1)
            assert (answer.status_code, answer.json()) == (200, {"ok": 1})
            time.sleep(0.05)  # let the server's close arrive before the next reuse
        assert server.connections == 3
    finally:
        pool.close()
        server.stop()


def test_a_broker_that_does_not_answer_times_out():
    server = OneShotServer(answer=False)
    pool = ConnectionPool({})
    try:
        started = time.monotonic()
        with pytest.raises(HTTPFailure, match="timed out"):
            pool.request("GET", server.url + "/x", connect_timeout=1, read_timeout=0.3)
        assert time.monotonic() - started < 1.5
    finally:
        pool.close()
        server.stop()


def test_a_broker_that_is_not_there_fails_at_once():
    pool = ConnectionPool({})
    with pytest.raises(HTTPFailure, match="ConnectionRefused"):
        pool.request("GET", f"http://127.0.0.1:{free_port()}/x", connect_timeout=1, read_timeout=1)
