"""The console page of one consumer group of a topic: its counts and its charts."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from messages import selectors as message_selectors
from mqcenter.console import render_page
from mqcenter.core.errors import NotFound
from mqcenter.core.roles import console_view
from mqcenter.dashboard import live_group_rows
from mqcenter.models import ConsoleRole
from topics.views import topic_for


@console_view(ConsoleRole.VIEWER)
def topic_group(request: HttpRequest, name: str, group: str) -> HttpResponse:
    topic = topic_for(request.console.principal, name)
    if not topic.groups.filter(name=group).exists():
        raise NotFound(f"Group {group!r} of topic {name!r} does not exist.")
    stats = [s for s in message_selectors.topic_stats(principal=request.console.principal, topic=topic.name)
             if s["group"] == group]
    live = live_group_rows(principal=request.console.principal, topic=topic.name, group=group)
    return render_page(request, "topics/group.html", {"topic": topic, "group": group, "stats": stats, **live})
