"""A tiny in-process HTTP broker for the SDK's own unit tests (retry, failover, batching, the
runner's bookkeeping). It implements just enough of API.md to drive the SDK; every behaviour a
user relies on is tested against the real server in ``test_e2e_*.py``."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = tuple[int, Any] | tuple[int, Any, dict[str, str]]


@dataclass
class Recorded:
    method: str
    path: str
    body: Any
    headers: dict[str, str]


def free_port() -> int:
    """A port nothing listens on (for "connection refused" brokers)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class FakeQueue:
    """In-memory messages with leases, enough for the runner's unit tests."""

    messages: dict[int, dict[str, Any]] = field(default_factory=dict)
    next_id: int = 1
    # Whether a pull applies the acks it carries (API.md's extension), as the real broker
    # does; False acts as a broker without the extension, which ignores them.
    pulls_ack: bool = False
    lock: threading.Condition = field(default_factory=threading.Condition)

    def add(
        self, topic: str, data: Any, *, timeout_seconds: int = 60, group: str = "default"
    ) -> int:
        with self.lock:
            mid = self.next_id
            self.next_id += 1
            self.messages[mid] = {
                "id": mid,
                "topic": topic,
                "group": group,
                "data": data,
                "key": None,
                "headers": {},
                "attempt": 0,
                "retry_remaining": 3,
                "timeout_seconds": timeout_seconds,
                "status": "NEW",
                "consumer": None,
                "lease_until": 0.0,
                "acks": [],
            }
            self.lock.notify_all()
            return mid

    def pull(self, body: dict[str, Any]) -> dict[str, Any]:
        deadline = time.monotonic() + float(body.get("wait_seconds", 0))
        with self.lock:
            while True:
                now = time.monotonic()
                for msg in self.messages.values():  # lease expiry, as the real broker does
                    if msg["status"] == "RUNNING" and msg["lease_until"] < now:
                        msg["status"] = "NEW"
                found = [
                    m
                    for m in self.messages.values()
                    if m["status"] == "NEW"
                    and m["topic"] == body["topic"]
                    and m["group"] == body["group"]
                ][: int(body["max_messages"])]
                if found or now >= deadline:
                    break
                self.lock.wait(min(0.05, deadline - now))
            for msg in found:
                msg["status"] = "RUNNING"
                msg["attempt"] += 1
                msg["consumer"] = body["consumer"]
                msg["lease_until"] = time.monotonic() + msg["timeout_seconds"]
            return {
                "messages": [
                    {
                        k: m[k]
                        for k in (
                            "id",
                            "topic",
                            "group",
                            "data",
                            "key",
                            "headers",
                            "attempt",
                            "retry_remaining",
                            "timeout_seconds",
                        )
                    }
                    for m in found
                ]
            }

    def ack(self, body: dict[str, Any]) -> dict[str, Any]:
        results = []
        with self.lock:
            for item in body["results"]:
                msg = self.messages[item["id"]]
                msg["acks"].append(item)
                if msg["status"] != "RUNNING" or msg["consumer"] != body["consumer"]:
                    results.append({"id": item["id"], "outcome": "stale"})
                elif item["status"] == "SUCCESS":
                    msg["status"] = "SUCCESS"
                    results.append({"id": item["id"], "outcome": "success"})
                else:
                    msg["status"] = "FAIL"
                    results.append({"id": item["id"], "outcome": "failed"})
        return {"results": results}

    def extend(self, body: dict[str, Any]) -> dict[str, Any]:
        results = []
        with self.lock:
            for mid in body["ids"]:
                msg = self.messages[mid]
                if msg["status"] == "RUNNING" and msg["consumer"] == body["consumer"]:
                    msg["lease_until"] = time.monotonic() + body["seconds"]
                    results.append({"id": mid, "lease_expires_at": "2099-01-01T00:00:00Z"})
                else:
                    results.append({"id": mid, "outcome": "stale"})
        return {"results": results}

    def release(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            for mid in body["ids"]:
                msg = self.messages[mid]
                if msg["status"] == "RUNNING" and msg["consumer"] == body["consumer"]:
                    msg["status"] = "NEW"
                    msg["attempt"] -= 1
                    msg["released"] = msg.get("released", 0) + 1
            self.lock.notify_all()
        return {"released": len(body["ids"])}

    def reply(self, method: str, path: str, body: Any) -> Reply:
        if path == "/api/v1/pull":
            if self.pulls_ack and body.get("results"):
                outcomes = self.ack(body)
                return 200, {**self.pull(body), **outcomes}
            return 200, self.pull(body)
        if path == "/api/v1/ack":
            return 200, self.ack(body)
        if path == "/api/v1/extend":
            return 200, self.extend(body)
        if path == "/api/v1/release":
            return 200, self.release(body)
        if path == "/api/v1/registry/consumers" and method == "POST":
            return 200, {"subscriptions": [], "heartbeat_seconds": 1, "brokers": []}
        if path.startswith("/api/v1/registry/consumers/") and method == "DELETE":
            return 204, None
        return 404, {"error": {"code": "not_found", "message": path}}


class FakeBroker:
    """Serve ``responder(method, path, body) -> (status, body[, headers])`` on 127.0.0.1."""

    def __init__(self, responder: Callable[[str, str, Any], Reply]) -> None:
        self.responder = responder
        self.requests: list[Recorded] = []
        broker = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                broker.requests.append(
                    Recorded(self.command, self.path, body, dict(self.headers.items()))
                )
                reply = broker.responder(self.command, self.path, body)
                status, payload = reply[0], reply[1]
                headers = reply[2] if len(reply) > 2 else {}  # type: ignore[misc]
                data = b"" if payload is None else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = do_PATCH = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def paths(self) -> list[str]:
        return [r.path for r in self.requests]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
