"""Console pages for the archive: search (the message list's filters plus when a message
finished), one archived message with its trace, and redrive of selected ones or a filter.
Thin doors: reads through selectors, the redrive through its service."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages as flash
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_POST

from messages import selectors as message_selectors
from messages.archive import selectors
from messages.archive.redrive import archive_messages_redrive
from messages.delivery import validation
from messages.delivery.trace_display import trace_for_console
from messages.filters import ArchiveFilter
from messages.views import (
    FILTER_FIELDS,
    STATUS_CHOICES,
    can_write,
    filter_params,
    filter_parse,
    id_from_form,
    pretty_json,
    visible_topic_names,
)
from mqcenter.console import htmx_redirect, query_string, render_page
from mqcenter.core.db import reads_replica
from mqcenter.core.errors import InvalidRequest
from mqcenter.core.roles import console_principal, console_view
from mqcenter.models import ConsoleRole

ARCHIVE_FIELDS = (*FILTER_FIELDS, "finished_after", "finished_before")
# Archived messages are finished: the live list's NEW/RUNNING/PREPARED choices never match.
ARCHIVE_STATUS_CHOICES = [c for c in STATUS_CHOICES if c[0] not in ("NEW", "RUNNING", "PREPARED")]


@console_view(ConsoleRole.VIEWER)
@reads_replica
def archive_list(request: HttpRequest) -> HttpResponse:
    params = filter_params(request.GET, ARCHIVE_FIELDS)
    error, next_cursor, filtered = "", None, False
    rows: list[Any] = []
    try:
        flt = filter_parse(params, ArchiveFilter)
        filtered = not flt.is_empty()
        rows, next_cursor = selectors.archive_search(
            principal=request.console.principal,
            filter=flt,
            cursor=request.GET.get("cursor") or None,
        )
    except InvalidRequest as exc:
        error = exc.message
    context = {
        "rows": rows,
        "params": params,
        "error": error,
        "status_choices": ARCHIVE_STATUS_CHOICES,
        "older_url": query_string(params, cursor=next_cursor) if next_cursor else None,
        "newest_url": query_string(params) if request.GET.get("cursor") else None,
        "filtered": filtered,
        "may_operate": console_principal(request.user, ConsoleRole.OPERATOR) is not None,
        "topics": visible_topic_names(request),
    }
    return render_page(request, "messages/archive_list.html", context, partial="results")


@console_view(ConsoleRole.VIEWER)
def archive_detail(request: HttpRequest, message_id: int) -> HttpResponse:
    message = selectors.archive_get(principal=request.console.principal, message_id=message_id)
    context = {
        "m": message,
        "trace": trace_for_console(message, message_selectors.message_trace(message)),
        "data_pretty": pretty_json(message.data),
        "headers_pretty": json.dumps(message.headers, indent=2, ensure_ascii=False)
        if message.headers
        else "",
        "may_write": can_write(request, message.topic),
    }
    return render_page(request, "messages/archive_detail.html", context)


@require_POST
@console_view(ConsoleRole.OPERATOR)
def archive_redrive(request: HttpRequest) -> HttpResponse:
    """Copy the selected archived messages, or every one matching the filter, back into the
    live table as NEW."""
    params = filter_params(request.POST, ARCHIVE_FIELDS)
    target: dict[str, Any]
    if request.POST.get("scope") == "filter":
        target = {"filter": filter_parse(params, ArchiveFilter)}
    else:
        raw_ids = [id_from_form(v) for v in request.POST.getlist("ids")]
        if not raw_ids:
            raise InvalidRequest(
                _("Select at least one message, or act on the whole filter."), details={"field": "ids"}
            )
        target = {"ids": validation.ids_list(raw_ids)}
    result = archive_messages_redrive(principal=request.console.principal, **target)
    if "job" in result:
        return htmx_redirect(request, reverse("console:job", args=[result["job"]]))
    copies = result["copies"]
    text = ngettext(
        "Redrove %(n)s archived message as new messages",
        "Redrove %(n)s archived messages as new messages",
        len(copies),
    ) % {"n": len(copies)}
    text += f" ({', '.join(str(c['id']) for c in copies[:20])})." if copies else "."
    if result["skipped"]:
        skipped = ", ".join(f"{s['id']} ({s['reason']})" for s in result["skipped"][:20])
        text += " " + _("Skipped: %(ids)s.") % {"ids": skipped}
    flash.success(request, text)
    if len(copies) == 1:
        return htmx_redirect(request, reverse("console:message", args=[copies[0]["id"]]))
    return htmx_redirect(request, reverse("console:archive") + query_string(params))
