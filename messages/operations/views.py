"""Console pages for operations on many messages: the message list's bulk actions (redrive,
requeue, cancel, delete, move), bulk jobs with their progress, and dead letters grouped by
(topic, group, reason) with whole-group actions. Thin doors: reads and writes go through
messages/operations/."""

from __future__ import annotations

from typing import Any

from django.contrib import messages as flash
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_POST

from messages.delivery import validation
from messages.filters import MessageFilter, filter_readable
from messages.models import DEAD_STATUSES
from messages.operations import bulk
from messages.operations.dead_letter_actions import dead_letter_group_act as group_act
from messages.operations.dead_letter_actions import dead_letter_group_export as group_export
from messages.operations.dead_letters import DEAD_LETTER_BOUND, dead_letter_groups
from messages.operations.models import BulkJob
from messages.operations.move import messages_move
from messages.views import (
    can_write,
    filter_params,
    filter_parse,
    id_from_form,
    list_context,
    writable_topics,
)
from mqcenter.console import htmx_redirect, next_path, query_string, render_page
from mqcenter.core.errors import InvalidRequest, MQError, NotFound
from mqcenter.core.roles import console_view
from mqcenter.models import ConsoleRole

BULK_ACTIONS = {"redrive", "requeue", "delete", "cancel", "move"}
DEAD_GROUPS_SHOWN = 100


@require_POST
@console_view(ConsoleRole.OPERATOR)
def messages_bulk(request: HttpRequest) -> HttpResponse:
    """Redrive, requeue, cancel, delete or move the selected messages or everything matching a filter."""
    params = filter_params(request.POST)
    try:
        return _bulk(request, params)
    except MQError as exc:
        return _bulk_refused(request, params, exc)


def _bulk_refused(request: HttpRequest, params: dict[str, str], exc: MQError) -> HttpResponse:
    """The message list again, with the refusal beside the buttons, the selection still
    checked and the typed target still typed: nothing was done, nothing is lost."""
    action = request.POST.get("action", "")
    field = exc.details.get("field") or ("to_topic" if action == "move" and isinstance(exc, NotFound) else "")
    context = list_context(request, params, cursor=None, reason=request.POST.get("reason", ""))
    shown = {str(m.id) for m in context["rows"]}
    selected = [i for i in request.POST.getlist("ids") if i.isdigit()]
    context.update({
        "bulk_error": exc.message, "bulk_field": field, "bulk_scope": request.POST.get("scope", "selected"),
        "selected": set(selected), "selected_hidden": [i for i in selected if i not in shown],
        "bulk_values": {"to_topic": request.POST.get("to_topic", ""), "to_group": request.POST.get("to_group", "")},
    })
    return render_page(request, "messages/list.html", context, status=exc.status)


def _bulk(request: HttpRequest, params: dict[str, str]) -> HttpResponse:
    action = request.POST.get("action", "")
    if action not in BULK_ACTIONS:
        raise InvalidRequest(_("Choose redrive, requeue, cancel, delete or move."), details={"field": "action"})
    principal = request.console.principal
    if request.POST.get("scope") == "filter":
        target: dict[str, Any] = {"filter": filter_parse(params)}
    else:
        raw_ids = [id_from_form(v) for v in request.POST.getlist("ids")]
        if not raw_ids:
            raise InvalidRequest(_("Select at least one message, or act on the whole filter."))
        target = {"ids": validation.ids_list(raw_ids)}
    if action == "move":
        return _move(request, target, params)
    if action == "delete":
        result = bulk.messages_delete(principal=principal, **target)
    elif action == "cancel":
        result = bulk.messages_cancel(principal=principal, **target)
    else:
        result = bulk.messages_requeue(principal=principal, dead_only=action == "redrive", **target)
    if "job" in result:
        return htmx_redirect(request, reverse("console:job", args=[result["job"]]))
    done = {"redrive": ngettext("Redrove %(n)s message.", "Redrove %(n)s messages.", result["count"]),
            "requeue": ngettext("Requeued %(n)s message.", "Requeued %(n)s messages.", result["count"]),
            "delete": ngettext("Deleted %(n)s message.", "Deleted %(n)s messages.", result["count"]),
            "cancel": ngettext("Cancelled %(n)s message.", "Cancelled %(n)s messages.", result["count"])}[action]
    flash.success(request, done % {"n": result["count"]})
    return htmx_redirect(request, reverse("console:messages") + query_string(params))


def _move(request: HttpRequest, target: dict[str, Any], params: dict[str, str]) -> HttpResponse:
    to_topic = validation.name(request.POST.get("to_topic", "").strip(), "to_topic")
    to_group = validation.name(request.POST.get("to_group", "").strip(), "to_group")
    result = messages_move(principal=request.console.principal, to_topic=to_topic, to_group=to_group, **target)
    if "job" in result:
        return htmx_redirect(request, reverse("console:job", args=[result["job"]]))
    skipped = ", ".join(f"{s['id']} ({s['reason']})" for s in result["skipped"][:20])
    moved = ngettext("Moved %(n)s message to %(to)s.", "Moved %(n)s messages to %(to)s.", result["count"])
    flash.success(request, moved % {"n": result["count"], "to": f"{to_topic}/{to_group}"}
                  + (" " + _("Skipped: %(ids)s.") % {"ids": skipped} if skipped else ""))
    return htmx_redirect(request, reverse("console:messages") + query_string(params))


@console_view(ConsoleRole.VIEWER)
def job_list(request: HttpRequest) -> HttpResponse:
    principal = request.console.principal
    rows = BulkJob.objects.order_by("-id")
    jobs = [j for j in rows[:200] if principal.biz_ids is None or j.biz_ids == sorted(principal.biz_ids)][:50]
    return render_page(request, "messages/jobs.html", {"jobs": [(j, filter_readable(j.filter)) for j in jobs]})


@console_view(ConsoleRole.VIEWER)
def job_detail(request: HttpRequest, job_id: int) -> HttpResponse:
    job = bulk.bulk_job_get(principal=request.console.principal, job_id=job_id)
    percent = 100 if job.state == BulkJob.State.DONE else (
        min(99, int(job.processed * 100 / job.total)) if job.total else 0)
    flat = {k: (",".join(v) if isinstance(v, list) else v) for k, v in job.filter.items()}
    # A dead-letter group's reason and a move's target are not message filters: the list
    # link leaves them out.
    listed = {k: v for k, v in flat.items() if k not in ("reason", "to_topic", "to_group")}
    return render_page(request, "messages/job.html", {
        "job": job, "percent": percent, "finished": job.state in (BulkJob.State.DONE, BulkJob.State.FAILED),
        "filter_query": query_string(listed),
        "filter_text": filter_readable(job.filter),
    }, partial="progress")


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
    result = bulk.messages_requeue(
        principal=principal, filter=MessageFilter(topic=topic, status=DEAD_STATUSES),
    )
    if "job" in result:
        return htmx_redirect(request, reverse("console:job", args=[result["job"]]))
    done = ngettext("Redrove %(n)s dead letter of %(topic)s.", "Redrove %(n)s dead letters of %(topic)s.", result["count"])
    flash.success(request, done % {"n": result["count"], "topic": topic})
    return htmx_redirect(request, next_path(request, reverse("console:dead_letters") + query_string({"topic": topic})))


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
    return htmx_redirect(request, next_path(request, reverse("console:dead_letters")))


@console_view(ConsoleRole.VIEWER)
def dead_letter_group_export(request: HttpRequest) -> HttpResponse:
    """The group's messages as a JSON-lines download, streamed batch by batch."""
    topic, group, reason = _group_key(request.GET)
    lines = group_export(principal=request.console.principal, topic=topic, group=group, reason=reason)
    response = StreamingHttpResponse(lines, content_type="application/x-ndjson; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="dead-{topic}-{group}.jsonl"'
    return response
