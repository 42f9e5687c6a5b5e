"""Who may open the console's WebSockets.

They ride on the session cookie, which a browser sends to any page's socket, so a page of
another site (or another port of this host) could open them as the signed-in operator. A
console socket is accepted only from a page of the site it is served by (the Origin's host and
port are the request's own Host) or from an origin listed in MQ_CONSOLE_ORIGINS, whatever
ALLOWED_HOSTS allows.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings


def origin_allowed(origin: str, host: str) -> bool:
    """Whether a socket opened by a page of `origin` may reach the console served at `host`."""
    if not origin:
        return False  # browsers always send one: a socket without it is not a console page's
    if origin in settings.MQ_CONSOLE_ORIGINS:
        return True
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and bool(host) and parts.netloc.lower() == host.lower()


class SameOriginSockets:
    """ASGI middleware: refuses (close 403) console sockets from other origins."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers", []))
        if origin_allowed(headers.get(b"origin", b"").decode("latin1"), headers.get(b"host", b"").decode("latin1")):
            await self.app(scope, receive, send)
            return
        await WebsocketDenier()(scope, receive, send)
