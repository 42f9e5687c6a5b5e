"""A test client with the Django test client's calling convention that sends every request
through the broker's whole ASGI application (`mqcenter.asgi.application`): the long-poll
layer for pulls, Django behind it for everything. Its event loop runs on its own thread, as
uvicorn's does, so requests from several test threads wait concurrently."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any
from urllib.parse import urlencode

import httpx


class AsgiResponse:
    def __init__(self, response: httpx.Response) -> None:
        self.status_code = response.status_code
        self.content = response.content
        self.headers = response.headers

    def json(self) -> Any:
        return json.loads(self.content)

    def __getitem__(self, name: str) -> str:
        return self.headers[name]

    def get(self, name: str, default: str | None = None) -> str | None:
        return self.headers.get(name, default)


class AsgiClient:
    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None
    _client: httpx.AsyncClient | None = None

    @classmethod
    def _start(cls) -> tuple[asyncio.AbstractEventLoop, httpx.AsyncClient]:
        with cls._lock:
            if cls._loop is None:
                from mqcenter.asgi import application

                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="asgi-test-loop", daemon=True).start()
                transport = httpx.ASGITransport(app=application)  # type: ignore[arg-type]
                cls._client = httpx.AsyncClient(transport=transport, base_url="http://testserver")
                cls._loop = loop
            assert cls._client is not None
            return cls._loop, cls._client

    def request(self, method: str, path: str, body: bytes | None = None, content_type: str | None = None,
                params: dict[str, Any] | None = None, **meta: str) -> AsgiResponse:
        loop, client = self._start()
        headers = {key[5:].replace("_", "-").lower(): value for key, value in meta.items() if key.startswith("HTTP_")}
        if content_type is not None:
            headers["content-type"] = content_type
        if params:
            path = f"{path}?{urlencode(params, doseq=True)}"
        call = client.request(method, path, content=body, headers=headers, timeout=60)
        return AsgiResponse(asyncio.run_coroutine_threadsafe(call, loop).result(timeout=60))

    def get(self, path: str, data: dict[str, Any] | None = None, **meta: str) -> AsgiResponse:
        return self.request("GET", path, params=data, **meta)

    def post(self, path: str, data: Any = "", content_type: str = "application/json", **meta: str) -> AsgiResponse:
        return self.request("POST", path, _bytes(data), content_type, **meta)

    def patch(self, path: str, data: Any = "", content_type: str = "application/json", **meta: str) -> AsgiResponse:
        return self.request("PATCH", path, _bytes(data), content_type, **meta)

    def delete(self, path: str, **meta: str) -> AsgiResponse:
        return self.request("DELETE", path, **meta)


def _bytes(data: Any) -> bytes:
    return data if isinstance(data, bytes) else str(data).encode()


def http_scope(method: str, path: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    """An ASGI HTTP scope as uvicorn builds it, with these headers after `Host`."""
    return {"type": "http", "method": method, "path": path, "raw_path": path.encode(), "query_string": b"",
            "root_path": "", "scheme": "http", "http_version": "1.1", "server": ("testserver", 80),
            "client": ("127.0.0.1", 5000), "headers": [(b"host", b"testserver"), *headers]}


def asgi_messages(app: Any, request: dict[str, Any], arrivals: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages `app` sends for `request`, whose body comes as `arrivals` (those it never
    asked for are left in the list)."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return arrivals.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(request, receive, send))
    return sent
