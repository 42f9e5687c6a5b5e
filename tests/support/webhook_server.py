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
        self.received: list[dict[str, Any]] = []  # {"path", "headers", "body", "at"}
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
                            "at": time.monotonic(),
                        }
                    )
                if index < server.slow:
                    server.release.wait(server.delay)
                try:
                    self.send_response(server.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(server.reply)))
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
