"""ASGI entry point: HTTP (Django), WebSockets (Channels) and the lifespan of this broker
process (registry heartbeat and lease sweep)."""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mqcenter.settings")

from django.core.asgi import get_asgi_application

django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from mqcenter.routing import websocket_urlpatterns  # noqa: E402

sockets = URLRouter(websocket_urlpatterns)
# Console sockets ride on the session cookie, so their Origin must be ours; API sockets
# (/ws/v1/...) authenticate with a bearer token and come from SDKs that send no Origin.
console_sockets = AllowedHostsOriginValidator(sockets)


async def websocket(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["path"].startswith("/ws/v1/"):
        await sockets(scope, receive, send)
    else:
        await console_sockets(scope, receive, send)




def http_application() -> Any:
    """Plain HTTP runs Django's WSGI handler on a thread pool (a2wsgi), not its ASGI handler.

    Measured on 2 cores (bench/, `serving` figure): Django's ASGI handler hops threads for
    every sync middleware and view, and served produce ~25% slower than one hop per request
    into the WSGI handler. Without the fast path (MQ_FAST_PATH=0) a waiting long-poll holds
    one pool thread (asleep on an event, its database connection handed back), so the pool
    is sized for the waiters: MQ_HTTP_THREADS (1,100 by default). MQ_HTTP_HANDLER=asgi
    restores Django's ASGI handler (kept for the comparison).
    """
    if os.environ.get("MQ_HTTP_HANDLER", "wsgi") == "asgi":
        return django_asgi_app
    from a2wsgi import WSGIMiddleware
    from django.core.wsgi import get_wsgi_application

    return WSGIMiddleware(get_wsgi_application(), workers=int(os.environ.get("MQ_HTTP_THREADS", "1100")))


def http_with_fast_path() -> Any:
    """Produce, pull and ack answered on the event loop (mqcenter/fastpath.py);
    MQ_FAST_PATH=0 sends them through Django like every other request (kept for the
    comparison)."""
    app = http_application()
    if os.environ.get("MQ_FAST_PATH", "1") == "0":
        return app
    from mqcenter.fastpath import FastPath

    return FastPath(app)


router = ProtocolTypeRouter({"http": http_with_fast_path(), "websocket": websocket})


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        await lifespan(receive, send)
        return
    await router(scope, receive, send)


async def lifespan(receive: Any, send: Any) -> None:
    from asgiref.sync import sync_to_async
    from django.conf import settings

    from mqcenter.heap import heap_settle
    from registry.node import BrokerNodeLoop

    node: BrokerNodeLoop | None = None
    while True:
        event = await receive()
        if event["type"] == "lifespan.startup":
            url = settings.MQ_ADVERTISED_URL or os.environ.get("MQ_ADVERTISED_URL", "")
            if url:
                node = BrokerNodeLoop(url)
                node.start()
            heap_settle()
            await send({"type": "lifespan.startup.complete"})
        elif event["type"] == "lifespan.shutdown":
            if node is not None:
                await sync_to_async(node.stop, thread_sensitive=False)()
            await send({"type": "lifespan.shutdown.complete"})
            return
