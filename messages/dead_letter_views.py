"""Console pages for dead letters: groups by (topic, group, reason) and whole-group actions.
Thin doors: reads and writes go through messages/services/dead_letter*.py."""

from __future__ import annotations

from django.contrib import messages as flash
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_POST

from messages import services, validation
from messages.filters import MessageFilter
from messages.models import DEAD_STATUSES
from messages.services.dead_letter_actions import dead_letter_group_act as group_act
from messages.services.dead_letter_actions import dead_letter_group_export as group_export
from messages.services.dead_letters import DEAD_LETTER_BOUND, dead_letter_groups
from messages.views import can_write, writable_topics
from mqcenter.console import htmx_redirect, render_page
from mqcenter.core.errors import InvalidRequest
from mqcenter.core.roles import console_view
from mqcenter.models import ConsoleRole

DEAD_GROUPS_SHOWN = 100


@console_view(ConsoleRole.VIEWER)
def dead_letters(request: HttpRequest) -> HttpResponse:
    topic = request.GET.get("topic", "").strip() or None
    groups, truncated = dead_letter_groups(principal=request.console.principal, topic=topic)
    writable = writable_topics(request, {g["topic"] for g in groups[:DEAD_GROUPS_SHOWN]})
    for group in groups:
        group["may_write"] = group["topic"] in writable
    return render_page(request, "messages/dead_letters.html", {
        "groups": groups[:DEAD_GROUPS_SHOWN], "hidden": len(groups) > DEAD_GROUPS_SHOWN, "shown": DEAD_GROUPS_SHOWN,
        "truncated": truncated, "bound": DEAD_LETTER_BOUND, "topic": topic or "",
        "may_write_topic": bool(topic) and can_write(request, topic or ""),
    })


@require_POST
@console_view(ConsoleRole.OPERATOR)
def dead_letters_redrive(request: HttpRequest) -> HttpResponse:
    """Redrive every dead letter of a topic (a background job when large)."""
    principal = request.console.principal
    topic = validation.name(request.POST.get("topic"), "topic")
    result = services.messages_requeue(
        principal=principal, filter=MessageFilter(topic=topic, status=DEAD_STATUSES),
    )
    if "job" in result:
        return htmx_redirect(request, reverse("console:job", args=[result["job"]]))
    done = ngettext("Redrove %(n)s dead letter of %(topic)s.", "Redrove %(n)s dead letters of %(topic)s.", result["count"])
    flash.success(request, done % {"n": result["count"], "topic": topic})
    return htmx_redirect(request, reverse("console:dead_letters"))


def _group_key(source: dict[str, str]) -> tuple[str, str, str]:
    topic = validation.name(source.get("topic"), "topic")
    group = validation.name(source.get("group"), "group")
    reason = source.get("reason")
    if not reason:
        raise InvalidRequest(_("reason is required."), details={"field": "reason"})
    return topic, group, reason


@require_POST
@console_view(ConsoleRole.OPERATOR)
def dead_letter_group_act(request: HttpRequest, action: str) -> HttpResponse:
    """Redrive or delete one whole (topic, group, reason) group; a large one becomes a job."""
    topic, group, reason = _group_key(request.POST)
    result = group_act(principal=request.console.principal, action=action, topic=topic, group=group, reason=reason)
    if "job" in result:
        return htmx_redirect(request, reverse("console:job", args=[result["job"]]))
    if action == "redrive":
        done = ngettext("Redrove %(n)s dead letter of %(to)s.", "Redrove %(n)s dead letters of %(to)s.", result["count"])
    else:
        done = ngettext("Deleted %(n)s dead letter of %(to)s.", "Deleted %(n)s dead letters of %(to)s.", result["count"])
    flash.success(request, done % {"n": result["count"], "to": f"{topic}/{group}"})
    return htmx_redirect(request, reverse("console:dead_letters"))


@console_view(ConsoleRole.VIEWER)
def dead_letter_group_export(request: HttpRequest) -> HttpResponse:
    """The group's messages as a JSON-lines download, streamed batch by batch."""
    topic, group, reason = _group_key(request.GET)
    lines = group_export(principal=request.console.principal, topic=topic, group=group, reason=reason)
    response = StreamingHttpResponse(lines, content_type="application/x-ndjson; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="dead-{topic}-{group}.jsonl"'
    return response
