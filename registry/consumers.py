"""WebSocket doors of the registry: push wake-ups for SDK consumers.

`ws://<broker>/ws/v1/consumer` with `Authorization: Bearer <token>`, or, for clients that
cannot set headers (browsers), the subprotocols `mq` and `mq-token.<token>` (the broker selects
`mq`). Never in the query string, which proxies and access logs keep. The client sends
`{"subscribe": [{"topic": "orders", "group": "billing"}]}`; the broker answers
`{"subscribed": [...]}` and then pushes `{"type": "wake", "topic", "group"}` whenever that
pair has deliverable work, so the client pulls at once instead of holding a long-poll open.
Messages are still claimed with POST /api/v1/pull: the socket carries no message data.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from messages import validation
from mqcenter.core.auth import Principal, principal_for_token
from mqcenter.core.errors import MQError
from registry.services import topic_visible
from registry.wakeups import Pair, wakeup_hub

MAX_SUBSCRIPTIONS = 100


TOKEN_SUBPROTOCOL = "mq-token."  # noqa: S105 - a prefix, not a secret


def _token_from(scope: dict[str, Any]) -> str:
    for name, value in scope.get("headers", []):
        if name == b"authorization" and value.lower().startswith(b"bearer "):
            return value[7:].decode("ascii", "replace").strip()
    for protocol in scope.get("subprotocols", []):
        if protocol.startswith(TOKEN_SUBPROTOCOL):
            return protocol[len(TOKEN_SUBPROTOCOL):]
    return ""


class ConsumerWakeupSocket(AsyncWebsocketConsumer):
    principal: Principal | None = None
    stop_listening: Callable[[], None] | None = None

    async def connect(self) -> None:
        try:
            self.principal = await sync_to_async(principal_for_token)(_token_from(self.scope))
        except MQError:
            await self.close(code=4401)
            return
        await self.accept("mq" if "mq" in self.scope.get("subprotocols", []) else None)

    async def disconnect(self, code: int) -> None:
        if self.stop_listening is not None:
            self.stop_listening()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            pairs = await sync_to_async(self._subscriptions)(json.loads(text_data or "{}"))
        except (ValueError, MQError) as exc:
            message = exc.message if isinstance(exc, MQError) else "send JSON"
            await self.send(json.dumps({"type": "error", "message": message}))
            return
        loop = asyncio.get_running_loop()

        def wake(pair: Pair) -> None:  # called from the notifying thread
            loop.call_soon_threadsafe(
                asyncio.ensure_future, self.send(json.dumps({"type": "wake", "topic": pair[0], "group": pair[1]}))
            )

        if self.stop_listening is not None:
            self.stop_listening()
        self.stop_listening = wakeup_hub().listen(pairs, wake)
        await self.send(json.dumps({"type": "subscribed", "subscriptions": [
            {"topic": t, "group": g} for t, g in pairs
        ]}))

    def _subscriptions(self, body: Any) -> list[Pair]:
        assert self.principal is not None
        raw = validation.body_object(body).get("subscribe")
        if not isinstance(raw, list) or not 0 < len(raw) <= MAX_SUBSCRIPTIONS:
            raise MQError(f"subscribe must list 1-{MAX_SUBSCRIPTIONS} subscriptions")
        pairs = []
        for index, item in enumerate(raw):
            if not isinstance(item, dict):
                raise MQError(f"subscribe[{index}] must be an object")
            topic = validation.name(item.get("topic"), f"subscribe[{index}].topic")
            group = validation.name(item.get("group", "default"), f"subscribe[{index}].group")
            self.principal.require("consume", topic)
            topic_visible(self.principal, topic)  # another business line's topic: forbidden
            pairs.append((topic, group))
        return pairs
