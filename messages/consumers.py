"""Live console pages over WebSockets: the dashboard, a topic's and a group's counts, and a
message's status and trace.

The browser opens `/ws/console/...` with its session cookie; the socket renders the page's
live part and pushes the HTML fragment when it changed (console.js swaps it in). It renders
again when the live counters signal a change of the pairs it shows (messages/stats/live.py:
within a second of a produce or an ack), at most once per THROTTLE_SECONDS, and
every LIVE_SECONDS in any case (what no signal covers: consumers, brokers, a message's
trace). Reads go through the same selectors and role checks as the pages, with the session
and the user read again each time: the socket closes (4403) within LIVE_SECONDS of a
sign-out, a deactivation or a removed grant, and a narrowed grant narrows what it shows (a
message page no longer reachable closes with 4404).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from importlib import import_module
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.contrib import auth
from django.http import HttpRequest, parse_cookie
from django.template.loader import render_to_string
from django.utils import translation

from mqcenter.core.errors import MQError
from mqcenter.core.roles import console_principal
from mqcenter.models import ConsoleRole

logger = logging.getLogger(__name__)

LIVE_SECONDS = 2.0
THROTTLE_SECONDS = 1.0


class ConsoleLiveSocket(AsyncWebsocketConsumer):
    """Base: authenticate from the session, then push `render()` whenever it changes."""

    task: asyncio.Task[None] | None = None
    stop_listening: Callable[[], None] | None = None
    changed: asyncio.Event | None = None

    async def connect(self) -> None:
        user = self.scope.get("user")
        principal = await database_sync_to_async(console_principal)(user, ConsoleRole.VIEWER)
        if principal is None:
            await self.close(code=4403)
            return
        await self.accept()
        self.changed = asyncio.Event()
        pairs = await database_sync_to_async(self.pairs)()
        if pairs:
            from messages.stats.live import live_listen

            loop, changed = asyncio.get_running_loop(), self.changed

            def signal(_pair: tuple[str, str]) -> None:  # called from the hub's thread
                # A server shutting down may close the loop before this socket's disconnect.
                if not loop.is_closed():
                    loop.call_soon_threadsafe(changed.set)

            self.stop_listening = live_listen(pairs, signal)
        self.task = asyncio.create_task(self._loop())

    async def disconnect(self, code: int) -> None:
        if self.stop_listening is not None:
            self.stop_listening()
        if self.task is not None:
            self.task.cancel()

    def pairs(self) -> list[tuple[str, str]]:
        """The (topic, group) pairs whose count changes trigger a render (none: poll only)."""
        return []

    async def _loop(self) -> None:
        assert self.changed is not None
        last, rendered_at = None, 0.0
        while True:
            # Throttled: a burst of signals costs one render per THROTTLE_SECONDS.
            await asyncio.sleep(max(0.0, rendered_at + THROTTLE_SECONDS - time.monotonic()))
            self.changed.clear()  # a signal from here on renders again
            rendered_at = time.monotonic()
            try:
                html = await database_sync_to_async(self._render_in_language)()
            except MQError:
                await self.close(code=4404)
                return
            except Exception:  # a failed read must not kill the page: try again next tick
                logger.exception("live console render failed")
                await asyncio.sleep(LIVE_SECONDS)
                continue
            if html is None:  # signed out, deactivated or grant removed since connecting
                await self.close(code=4403)
                return
            if html != last:
                await self.send(text_data=html)
                last = html
            with contextlib.suppress(TimeoutError):  # LIVE_SECONDS without a signal: render anyway
                await asyncio.wait_for(self.changed.wait(), LIVE_SECONDS)

    def _render_checked(self) -> str | None:
        principal = console_principal(self._current_user(), ConsoleRole.VIEWER)
        if principal is None:
            return None
        return self.render(principal)

    def _current_user(self) -> Any:
        """The session's user as the database has it now, not as it was at connect: None once
        the session is gone (signed out, flushed, expired) or the user's password changed."""
        key = getattr(self.scope.get("session"), "session_key", None)
        if not key:
            return None
        store = import_module(settings.SESSION_ENGINE).SessionStore(key)
        user = auth.get_user(SimpleNamespace(session=store))  # type: ignore[arg-type]
        return user if user.is_authenticated else None

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
    def pairs(self) -> list[tuple[str, str]]:
        from registry.wakeups import ANY

        return [ANY]

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


class TopicSocket(ConsoleLiveSocket):
    """A topic's live counts per group (`/ws/console/topics/<name>`, optionally
    `?group=<group>` for one group's page)."""

    def pairs(self) -> list[tuple[str, str]]:
        from topics.models import TopicGroup

        name, group = self.scope["url_route"]["kwargs"]["name"], self.query("group")
        groups = [group] if group else list(TopicGroup.objects.filter(topic__name=name).values_list("name", flat=True))
        return [(name, g) for g in groups]

    def render(self, principal: Any) -> str:
        from mqcenter.dashboard import live_group_rows
        from topics.views import topic_for

        topic = topic_for(principal, self.scope["url_route"]["kwargs"]["name"])
        context = live_group_rows(principal=principal, topic=topic.name, group=self.query("group") or None)
        return render_to_string("console/_live_counts.html#live", context)
