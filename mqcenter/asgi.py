"""ASGI entry point of a broker process: HTTP (Django), WebSockets (Channels) and the
lifespan (the broker's background loop: lease recovery and registry heartbeats).

HTTP requests run Django's WSGI handler on a pool of MQ_HTTP_THREADS threads
(`mqcenter.wsgi_bridge`, one hop to a thread and one back): sync DRF views served that way
answer ~1.5x the produce rate of Django's ASGI handler, which hops threads for each sync
middleware and view (`python -m bench serving`). A long-poll pull waits
between its attempts on the event loop (`mqcenter.longpoll`), holding no thread.
"""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mqcenter.settings")

from django.core.wsgi import get_wsgi_application

django_wsgi = get_wsgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402

from mqcenter.core.origins import SameOriginSockets  # noqa: E402
from mqcenter.longpoll import LongPoll  # noqa: E402
from mqcenter.routing import websocket_urlpatterns  # noqa: E402
from mqcenter.wsgi_bridge import WsgiBridge  # noqa: E402

sockets = URLRouter(websocket_urlpatterns)
# Console sockets ride on the session cookie, so their Origin must be this site's; API
# sockets (/ws/v1/...) authenticate with a bearer token and come from SDKs that send no Origin.
console_sockets = SameOriginSockets(sockets)


async def websocket(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["path"].startswith("/ws/v1/"):
        await sockets(scope, receive, send)
    else:
        await console_sockets(scope, receive, send)


http = LongPoll(WsgiBridge(django_wsgi, workers=settings.MQ_HTTP_THREADS))  # type: ignore[arg-type]
router = ProtocolTypeRouter({"http": http, "websocket": websocket})


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        await lifespan(receive, send)
        return
    await router(scope, receive, send)


async def lifespan(receive: Any, send: Any) -> None:
    from asgiref.sync import sync_to_async

    from mqcenter.heap import heap_settle
    from registry.node import BrokerNodeLoop

    node: BrokerNodeLoop | None = None
    while True:
        event = await receive()
        if event["type"] == "lifespan.startup":
            node = BrokerNodeLoop(settings.MQ_ADVERTISED_URL or os.environ.get("MQ_ADVERTISED_URL", ""))
            node.start()
            heap_settle()
            await send({"type": "lifespan.startup.complete"})
        elif event["type"] == "lifespan.shutdown":
            if node is not None:
                await sync_to_async(node.stop, thread_sensitive=False)()
            await send({"type": "lifespan.shutdown.complete"})
            return
