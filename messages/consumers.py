"""Live console pages over WebSockets: the dashboard and a message's status and trace.

The browser opens `/ws/console/dashboard` or `/ws/console/messages/<id>` with its session
cookie; the socket re-reads the page's live part every LIVE_SECONDS and pushes the rendered
HTML fragment when it changed (console.js swaps it in). Reads go through the same selectors
and role checks as the pages, and the socket closes when the user loses the role.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.http import HttpRequest, parse_cookie
from django.template.loader import render_to_string
from django.utils import translation

from mqcenter.core.errors import MQError
from mqcenter.core.roles import console_principal
from mqcenter.models import ConsoleRole

logger = logging.getLogger(__name__)

LIVE_SECONDS = 2.0


class ConsoleLiveSocket(AsyncWebsocketConsumer):
    """Base: authenticate from the session, then push `render()` whenever it changes."""

    task: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        user = self.scope.get("user")
        principal = await database_sync_to_async(console_principal)(user, ConsoleRole.VIEWER)
        if principal is None:
            await self.close(code=4403)
            return
        await self.accept()
        self.task = asyncio.create_task(self._loop())

    async def disconnect(self, code: int) -> None:
        if self.task is not None:
            self.task.cancel()

    async def _loop(self) -> None:
        last = None
        while True:
            try:
                html = await database_sync_to_async(self._render_in_language)()
            except MQError:
                await self.close(code=4404)
                return
            except Exception:  # a failed read must not kill the page: try again next tick
                logger.exception("live console render failed")
                html = None
            if html is None and last is not None:
                pass
            elif html is None:
                await self.close(code=4403)
                return
            elif html != last:
                await self.send(text_data=html)
                last = html
            await asyncio.sleep(LIVE_SECONDS)

    def _render_checked(self) -> str | None:
        principal = console_principal(self.scope.get("user"), ConsoleRole.VIEWER)
        if principal is None:  # signed out, deactivated or grant removed since connecting
            return None
        return self.render(principal)

    def render(self, principal: Any) -> str:
        raise NotImplementedError

    def query(self, name: str, default: str = "") -> str:
        raw = parse_qs(self.scope.get("query_string", b"").decode("ascii", "replace"))
        return (raw.get(name) or [default])[0]

    def _render_in_language(self) -> str | None:
        """Render in the page's language, chosen as LocaleMiddleware chose it for the page:
        the language cookie (the header's switch), else the browser's Accept-Language."""
        headers = {k: v.decode("latin-1") for k, v in self.scope.get("headers", [])}
        request = HttpRequest()
        request.COOKIES = parse_cookie(headers.get(b"cookie", ""))
        request.META["HTTP_ACCEPT_LANGUAGE"] = headers.get(b"accept-language", "")
        with translation.override(translation.get_language_from_request(request)):
            return self._render_checked()


class DashboardSocket(ConsoleLiveSocket):
    def render(self, principal: Any) -> str:
        from mqcenter.dashboard import dashboard_summary

        summary = dashboard_summary(principal=principal, window=self.query("window", "hour"))
        return render_to_string("console/dashboard.html#live", {"d": summary})


class MessageSocket(ConsoleLiveSocket):
    def render(self, principal: Any) -> str:
        from messages import selectors
        from messages.views import detail_context

        message, trace = selectors.message_detail(
            principal=principal, message_id=int(self.scope["url_route"]["kwargs"]["message_id"])
        )
        return render_to_string("messages/detail.html#live", detail_context(None, message, trace))
