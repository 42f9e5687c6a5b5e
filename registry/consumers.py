"""WebSocket doors of the registry: push wake-ups for SDK consumers.

`ws://<broker>/ws/v1/consumer` with `Authorization: Bearer <token>`, or, for clients that
cannot set headers (browsers), the subprotocols `mq` and `mq-token.<token>` (the broker selects
`mq`). Never in the query string, which proxies and access logs keep. The client sends
`{"subscribe": [{"topic": "orders", "group": "billing"}]}`; the broker answers
`{"subscribed": [...]}` and then pushes `{"type": "wake", "topic", "group"}` whenever that
pair has deliverable work, so the client pulls at once instead of holding a long-poll open.
Messages are still claimed with POST /api/v1/pull: the socket carries no message data.

A wake goes out only for a topic that exists and belongs to a business line the token
reaches: a subscription to another line's topic is answered as one to a topic that does not
exist yet (subscribed, never woken), so the socket tells nothing of other lines' names. Every
RECHECK_SECONDS the socket reads its token again: revoked, it closes with 4401; narrowed so that
a subscription is no longer allowed, with 4403.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from messages.delivery import validation
from mqcenter.core.auth import Principal, principal_for_token, principal_for_token_now
from mqcenter.core.errors import Forbidden, MQError, Unauthenticated
from registry.wakeups import Pair, wakeup_hub
from topics.cache import topic_cache

MAX_SUBSCRIPTIONS = 100
# How often an open socket checks its token again: a revoked or narrowed token's socket
# closes within this (plus one database read).
RECHECK_SECONDS = 2.0


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
    token = ""
    pairs: tuple[Pair, ...] = ()
    stop_listening: Callable[[], None] | None = None
    recheck: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        self.token = _token_from(self.scope)
        try:
            self.principal = await sync_to_async(principal_for_token)(self.token)
        except MQError:
            await self.close(code=4401)
            return
        await self.accept("mq" if "mq" in self.scope.get("subprotocols", []) else None)
        self.recheck = asyncio.create_task(self._recheck())

    async def disconnect(self, code: int) -> None:
        if self.stop_listening is not None:
            self.stop_listening()
        if self.recheck is not None:
            self.recheck.cancel()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            pairs = await sync_to_async(self._subscriptions)(json.loads(text_data or "{}"))
        except (ValueError, MQError, RecursionError) as exc:
            message = exc.message if isinstance(exc, MQError) else "send JSON"
            await self.send(json.dumps({"type": "error", "message": message}))
            return
        loop = asyncio.get_running_loop()

        def wake(pair: Pair) -> None:  # called from the notifying thread
            loop.call_soon_threadsafe(asyncio.ensure_future, self._wake(pair))

        if self.stop_listening is not None:
            self.stop_listening()
        self.pairs = tuple(pairs)
        self.stop_listening = wakeup_hub().listen(pairs, wake)
        await self.send(json.dumps({"type": "subscribed", "subscriptions": [
            {"topic": t, "group": g} for t, g in pairs
        ]}))

    async def _wake(self, pair: Pair) -> None:
        if await database_sync_to_async(self._may_hear)(pair[0]):
            await self.send(json.dumps({"type": "wake", "topic": pair[0], "group": pair[1]}))

    def _may_hear(self, topic_name: str) -> bool:
        """A wake is news that a topic has work: only for an existing topic of the token's lines."""
        topic = topic_cache.get(topic_name)
        return topic is not None and self.principal is not None and self.principal.may_biz(topic.biz_id)

    async def _recheck(self) -> None:
        while True:
            await asyncio.sleep(RECHECK_SECONDS)
            code = await database_sync_to_async(self._still_allowed)()
            if code is not None:
                if self.stop_listening is not None:
                    self.stop_listening()
                    self.stop_listening = None
                await self.close(code=code)
                return

    def _still_allowed(self) -> int | None:
        """None while the token is valid and allows every subscription; else the close code."""
        try:
            self.principal = principal_for_token_now(self.token)
            for topic, _group in self.pairs:
                self.principal.require("consume", topic)
        except Unauthenticated:
            return 4401
        except Forbidden:
            return 4403
        return None

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
            pairs.append((topic, group))
        return pairs
