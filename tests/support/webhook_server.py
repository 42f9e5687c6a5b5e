"""A real HTTP server on 127.0.0.1 (a thread of the test process) that records every POST,
standing in for Slack, DingTalk, WeCom or an operator's own alarm endpoint."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class WebhookServer:
    """Answers `status` with `reply`. The first `slow` requests are held `delay` seconds
    before the answer (long enough for the broker's post to time out)."""

    def __init__(
        self,
        *,
        status: int = 200,
        reply: bytes = b'{"errcode": 0, "errmsg": "ok"}',
        slow: int = 0,
        delay: float = 0.0,
    ) -> None:
        self.status, self.reply, self.slow, self.delay = status, reply, slow, delay
        self.extra_headers: dict[str, str] = {}  # sent with every answer (a redirect's Location)
        self.received: list[dict[str, Any]] = []  # {"path", "headers", "body", "raw", "at"}
        self.lock = threading.Lock()
        self.release = threading.Event()  # set on exit: held answers end at once
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with server.lock:
                    index = len(server.received)
                    server.received.append(
                        {
                            "path": self.path,
                            "headers": dict(self.headers),
                            "body": json.loads(body or b"null"),
                            "raw": body,
                            "at": time.monotonic(),
                        }
                    )
                if index < server.slow:
                    server.release.wait(server.delay)
                try:
                    self.send_response(server.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(server.reply)))
                    for name, value in server.extra_headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(server.reply)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the caller gave up waiting (its timeout)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.host = f"127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def url(self, path: str = "/hook") -> str:
        return f"http://{self.host}{path}"

    def bodies(self, path: str) -> list[Any]:
        with self.lock:
            return [r["body"] for r in self.received if r["path"] == path]

    def __enter__(self) -> WebhookServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


class RawServer:
    """A TCP server on 127.0.0.1 (threads of the test process) that answers each connection
    with `answer(connection)`: for servers that do not speak proper HTTP. Counts the
    connections it took; `stop` (or leaving the `with`) ends every answer still running."""

    def __init__(self, answer: Any) -> None:
        import socket

        self.answer = answer
        self.stop = threading.Event()
        self.connections = 0
        self.lock = threading.Lock()
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=512)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.host = f"127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def url(self, path: str = "/hook") -> str:
        return f"http://{self.host}{path}"

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self.lock:
                self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: Any) -> None:
        try:
            with conn:
                conn.settimeout(5)
                conn.recv(65536)  # the request (its head at least)
                self.answer(conn, self.stop)
        except OSError:
            pass  # the caller hung up: its deadline

    def __enter__(self) -> RawServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        self.sock.close()


def dripping_server(every: float = 1.0, answer: bytes = b'HTTP/1.1 200 OK\r\nContent-Length: 17\r\n\r\n{"state":"commit"}') -> RawServer:
    """An HTTP server that sends a valid answer one byte every `every` seconds: each read
    gets a byte well within any per-read timeout, the whole answer takes minutes."""

    def drip(conn: Any, stop: threading.Event) -> None:
        for byte in answer:
            if stop.wait(every):
                return
            conn.sendall(bytes([byte]))

    return RawServer(drip)


def not_http_server(reply: bytes = b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n") -> RawServer:
    """A server of another protocol: answers a line that is no HTTP status line and hangs up."""

    def speak(conn: Any, stop: threading.Event) -> None:
        import socket

        conn.sendall(reply)
        # Hang up politely: close our side, then read what is left of the request, so the
        # kernel never answers unread bytes with a reset (the caller must see the bad answer).
        conn.shutdown(socket.SHUT_WR)
        while conn.recv(65536):
            pass

    return RawServer(speak)


def reset_server() -> RawServer:
    """A server that resets every connection once it has read the request."""
    import socket
    import struct

    def reset(conn: Any, stop: threading.Event) -> None:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    return RawServer(reset)
