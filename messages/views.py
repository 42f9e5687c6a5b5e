"""Console pages for messages: search, detail with trace, edit, add, one message's actions,
and the activity pages (scheduled, retrying, in flight by consumer). Thin doors: reads go
through selectors, writes through services."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.contrib import messages as flash
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, pgettext_lazy
from django.views.decorators.http import require_POST

from messages import selectors, services
from messages.delivery import validation
from messages.delivery.trace_display import trace_for_console
from messages.filters import MessageFilter
from messages.models import DEAD_STATUSES, MAX_PRIORITY, Message
from messages.operations import bulk
from messages.operations.dead_letters import dead_letter_group_ids
from messages.stats.flush import backlog_live
from mqcenter.console import (
    datetime_local,
    form_errors,
    htmx_redirect,
    int_from_form,
    json_from_form,
    moment_from_form,
    query_string,
    render_page,
)
from mqcenter.core.db import reads_replica
from mqcenter.core.errors import (
    Conflict,
    Forbidden,
    InvalidRequest,
    MQError,
    NotFound,
    PayloadTooLarge,
)
from mqcenter.core.roles import console_principal, console_view
from mqcenter.dashboard import visible_topic_names as visible_topics
from mqcenter.models import ConsoleRole
from topics.models import Topic

FILTER_FIELDS = ("topic", "group", "status", "priority", "key", "id", "added_after", "added_before", "text")
STATUS_CHOICES = [("", gettext_lazy("any status")), ("NEW", "NEW"), ("RUNNING", "RUNNING"), ("SUCCESS", "SUCCESS"),
                  ("FAIL", "FAIL"), ("TIMEOUT", "TIMEOUT"), ("EXPIRED", "EXPIRED"),
                  ("FAIL,TIMEOUT,EXPIRED", gettext_lazy("dead (FAIL, TIMEOUT or EXPIRED)")),
                  ("PREPARED", "PREPARED"), ("CANCELLED", "CANCELLED")]
# The trace timeline's event names (TraceEvent's labels), marked for the console's catalog:
# _trace.html translates get_event_display(); the model and the API keep the English.
TRACE_EVENT_NAMES = [
    pgettext_lazy("trace event", "Produced"),
    pgettext_lazy("trace event", "Pulled"),
    pgettext_lazy("trace event", "Acked"),
    pgettext_lazy("trace event", "Nacked"),
    pgettext_lazy("trace event", "Retry Scheduled"),
    pgettext_lazy("trace event", "Dead"),
    pgettext_lazy("trace event", "Lease Expired"),
    pgettext_lazy("trace event", "Extended"),
    pgettext_lazy("trace event", "Released"),
    pgettext_lazy("trace event", "Stale Ack"),
    pgettext_lazy("trace event", "Edited"),
    pgettext_lazy("trace event", "Redriven"),
    pgettext_lazy("trace event", "Archived"),
    pgettext_lazy("trace event", "Committed"),
    pgettext_lazy("trace event", "Cancelled"),
    pgettext_lazy("trace event", "Moved"),
]


def filter_params(source: Any, names: tuple[str, ...] = FILTER_FIELDS) -> dict[str, str]:
    """The filter fields present in a query string or form, as text."""
    return {name: source.get(name, "").strip() for name in names if source.get(name, "").strip()}


def filter_parse(params: dict[str, str], filter_class: type[MessageFilter] = MessageFilter) -> MessageFilter:
    raw: dict[str, Any] = dict(params)
    for name in filter_class.TIME_FIELDS:
        if name in raw:
            moment = moment_from_form(raw[name], name)
            raw[name] = moment.isoformat() if moment else None
    return filter_class.parse(raw)


def writable_topics(request: HttpRequest, names: set[str]) -> set[str]:
    """Which of these topics may the signed-in user change messages of (operator on the
    topic's business line)? Two queries, whatever the number of topics."""
    principal = console_principal(request.user, ConsoleRole.OPERATOR)
    if principal is None:
        return set()
    if principal.biz_ids is None:
        return set(names)
    return set(Topic.objects.filter(name__in=names, biz_id__in=principal.biz_ids).values_list("name", flat=True))


def can_write(request: HttpRequest, topic_name: str) -> bool:
    return topic_name in writable_topics(request, {topic_name})


# --- list and bulk -----------------------------------------------------------------------


@console_view(ConsoleRole.VIEWER)
@reads_replica
def message_list(request: HttpRequest) -> HttpResponse:
    params = filter_params(request.GET)
    context = list_context(request, params, cursor=request.GET.get("cursor") or None, reason=request.GET.get("reason", ""))
    return render_page(request, "messages/list.html", context, partial="results")


def list_context(request: HttpRequest, params: dict[str, str], *, cursor: str | None, reason: str = "") -> dict[str, Any]:
    """The message list's page: `params` filtered, from `cursor`; with `reason` (a dead-letter
    group's normalised reason, from the dead-letter page) only that group's dead letters."""
    error, next_cursor = "", None
    rows: list[Any] = []
    reason = reason.strip()
    try:
        flt = filter_parse(params)
        if reason:
            rows, next_cursor = dead_letter_page(request, flt, reason, cursor)
        else:
            rows, next_cursor = selectors.messages_search(principal=request.console.principal, filter=flt, cursor=cursor)
    except InvalidRequest as exc:
        error, flt = exc.message, MessageFilter()
    shown = {**params, "reason": reason} if reason else params
    return {
        "counts": state_counts(request, flt, params),
        "rows": rows, "params": params, "reason": reason, "error": error, "status_choices": STATUS_CHOICES,
        "priorities": [str(p) for p in range(MAX_PRIORITY, -1, -1)],
        "older_url": query_string(shown, cursor=next_cursor) if next_cursor else None,
        "newest_url": query_string(shown) if cursor else None,
        "filtered": not flt.is_empty(),
        "may_operate": console_principal(request.user, ConsoleRole.OPERATOR) is not None,
        "may_write_group": bool(reason and flt.topic) and can_write(request, flt.topic or ""),
        "topics": visible_topic_names(request),
    }


COUNTED = ("topic", "group", "status")


def state_counts(request: HttpRequest, flt: MessageFilter, params: dict[str, str]) -> dict[str, Any]:
    """Waiting, in flight and dead for the filter's topic and group, from the live counters
    (never a COUNT over the table): exact for a filter of topic, group and status only,
    else an estimate (`approximate`: the counts of the topic and group, which the other
    fields narrow). Each links to its list."""
    counts, _ = backlog_live()
    visible = visible_topics(request.console.principal)
    rows = [values for (topic, group), values in counts.items()
            if (visible is None or topic in visible) and (not flt.topic or topic == flt.topic)
            and (not flt.group or group == flt.group)]
    base = {k: v for k, v in params.items() if k in ("topic", "group")}
    return {
        "approximate": any(k not in COUNTED for k in params),
        "states": [
            {"name": "NEW", "n": sum(r["new"] for r in rows), "query": query_string(base, status="NEW")},
            {"name": "RUNNING", "n": sum(r["running"] for r in rows), "query": query_string(base, status="RUNNING")},
            {"name": "FAIL + TIMEOUT + EXPIRED", "n": sum(r["dead"] for r in rows),
             "query": query_string(base, status="FAIL,TIMEOUT,EXPIRED")},
        ],
    }


def dead_letter_page(request: HttpRequest, flt: MessageFilter, reason: str, cursor: str | None) -> tuple[list[Any], str | None]:
    """A page of one dead-letter group's messages (topic, group, reason), newest first; the
    cursor is the last id shown."""
    if not (flt.topic and flt.group):
        raise InvalidRequest(_("A reason lists one dead-letter group: give its topic and group too."),
                             details={"field": "reason"})
    before = int(cursor) if cursor and cursor.isdigit() else None
    size = selectors.PAGE_SIZE
    ids = dead_letter_group_ids(principal=request.console.principal, topic=flt.topic, group=flt.group,
                                reason=reason, before_id=before, limit=size + 1)
    rows = list(Message.objects.filter(id__in=ids[:size]).order_by("-id"))
    return rows, (str(ids[size - 1]) if len(ids) > size else None)


def visible_topic_names(request: HttpRequest) -> list[str]:
    rows = Topic.objects.all()
    principal = request.console.principal
    if principal.biz_ids is not None:
        rows = rows.filter(biz_id__in=principal.biz_ids)
    return list(rows.order_by("name").values_list("name", flat=True)[:1000])


def id_from_form(value: str) -> int:
    try:
        return int(value)
    except ValueError as exc:
        raise InvalidRequest(_("ids must be numbers."), details={"field": "ids"}) from exc


# --- one message -------------------------------------------------------------------------


def pretty_json(text: str) -> str:
    """Indented JSON for reading (autoescaped by the template, never marked safe)."""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except (ValueError, TypeError):
        return text


def detail_context(request: HttpRequest | None, message: Message, trace: list[Any]) -> dict[str, Any]:
    return {
        "m": message, "trace": trace_for_console(message, trace), "data_pretty": pretty_json(message.data),
        "headers_pretty": json.dumps(message.headers, indent=2, ensure_ascii=False) if message.headers else "",
        "is_dead": message.status in DEAD_STATUSES,
    }


EDIT_FIELDS = ("data", "status", "effect_time", "retry_remaining")


def _detail_page(request: HttpRequest, message: Any, trace: list[Any], *, edit: dict[str, Any] | None = None,
                 errors: dict[str, str] | None = None, status: int = 200) -> HttpResponse:
    """The message page; `edit` refills the edit form with what the operator typed."""
    context = detail_context(request, message, trace)
    context.update({
        "may_write": can_write(request, message.topic),
        "status_edit_choices": services.EDITABLE_STATUSES,
        "edit": edit or {"data": context["data_pretty"], "status": "",
                         "effect_time": datetime_local(message.effect_time), "retry_remaining": message.retry_remaining},
        "errors": errors or {},
    })
    return render_page(request, "messages/detail.html", context, partial="live", status=status)


@console_view(ConsoleRole.VIEWER)
def message_detail(request: HttpRequest, message_id: int) -> HttpResponse:
    message, trace = selectors.message_detail(principal=request.console.principal, message_id=message_id)
    return _detail_page(request, message, trace)


def _edit_changes(message: Any, post: Any) -> dict[str, Any]:
    """The edit form's fields that differ from the message (InvalidRequest naming the field
    for a bad one)."""
    changes: dict[str, Any] = {}
    if "data" in post:
        text = validation.data_text(json_from_form(post["data"], "data"))
        if len(text.encode()) > settings.MQ_MAX_DATA_BYTES:
            raise InvalidRequest(_("data is larger than %(n)s bytes.") % {"n": settings.MQ_MAX_DATA_BYTES},
                                 details={"field": "data"})
        if text != message.data:
            changes["data"] = text
    status = post.get("status", "")
    if status and status != message.status:
        changes["status"] = status
    effect = moment_from_form(post.get("effect_time"), "effect_time")
    if effect is not None and datetime_local(effect) != datetime_local(message.effect_time):
        changes["effect_time"] = effect
    retries = int_from_form(post.get("retry_remaining"), "retry_remaining", high=1000)
    if retries is not None and retries != message.retry_remaining:
        changes["retry_remaining"] = retries
    return changes


@require_POST
@console_view(ConsoleRole.OPERATOR)
def message_edit(request: HttpRequest, message_id: int) -> HttpResponse:
    """Save the edit form; a refused edit shows the page again with the typed values and
    the error beside its field."""
    principal = request.console.principal
    message_visible_to_change(request, message_id)
    message = services.message_get(principal=principal, message_id=message_id)
    try:
        changes = _edit_changes(message, request.POST)
        if changes:
            services.message_edit(principal=principal, message_id=message.id, changes=changes)
    except (InvalidRequest, Conflict, PayloadTooLarge) as exc:
        typed = {name: request.POST.get(name, "") for name in EDIT_FIELDS}
        message, trace = selectors.message_detail(principal=principal, message_id=message_id)
        return _detail_page(request, message, trace, edit=typed, errors=form_errors(exc, EDIT_FIELDS),
                            status=exc.status)
    if changes:
        flash.success(request, _("Saved message %(id)s: changed %(fields)s.")
                      % {"id": message.id, "fields": ", ".join(sorted(changes))})
    else:
        flash.info(request, _("Nothing changed."))
    return htmx_redirect(request, reverse("console:message", args=[message.id]))


def message_visible_to_change(request: HttpRequest, message_id: int) -> None:
    """404 unless the user sees the message at all; 403 when it is of a line where the user is
    no operator (they know it exists: they may read it)."""
    viewer = console_principal(request.user, ConsoleRole.VIEWER)
    assert viewer is not None  # an operator is a viewer too
    services.message_get(principal=viewer, message_id=message_id)
    try:
        services.message_get(principal=request.console.principal, message_id=message_id)
    except NotFound as exc:
        raise Forbidden(_("Only an operator of this message's business line changes it.")) from exc


@require_POST
@console_view(ConsoleRole.OPERATOR)
def message_action(request: HttpRequest, message_id: int, action: str) -> HttpResponse:
    """Redrive, requeue, cancel or delete one message."""
    principal = request.console.principal
    message_visible_to_change(request, message_id)
    if action == "cancel":
        services.message_cancel(principal=principal, message_id=message_id)
        flash.success(request, _("Cancelled message %(id)s.") % {"id": message_id})
        return htmx_redirect(request, reverse("console:message", args=[message_id]))
    if action == "delete":
        bulk.messages_delete(principal=principal, ids=[message_id])
        flash.success(request, _("Deleted message %(id)s.") % {"id": message_id})
        return htmx_redirect(request, reverse("console:messages"))
    result = bulk.messages_requeue(principal=principal, ids=[message_id], dead_only=action == "redrive")
    if result.get("count"):
        flash.success(request, _("Message %(id)s is queued again (NEW, effective now).") % {"id": message_id})
    else:
        refused = (_("Message %(id)s was not redriven: only dead letters (FAIL, TIMEOUT, EXPIRED) are redriven.")
                   if action == "redrive"
                   else _("Message %(id)s was not requeued: a RUNNING message stays with its consumer."))
        flash.warning(request, refused % {"id": message_id})
    return htmx_redirect(request, reverse("console:message", args=[message_id]))


@console_view(ConsoleRole.OPERATOR)
def message_add(request: HttpRequest) -> HttpResponse:
    """Produce one message through the same service as the API."""
    form = {"topic": request.GET.get("topic", ""), "group": "", "key": "", "data": "{}", "delay_seconds": "",
            "dedup_key": ""}
    errors: dict[str, str] = {}
    status = 200
    if request.method == "POST":
        form = {name: request.POST.get(name, "").strip() for name in form}
        try:
            item: dict[str, Any] = {"topic": form["topic"], "data": json_from_form(form["data"], "data")}
            for name in ("group", "key", "dedup_key"):
                if form[name]:
                    item[name] = form[name]
            if form["delay_seconds"]:
                item["delay_seconds"] = int_from_form(form["delay_seconds"], "delay_seconds", high=10**8)
            first = services.message_add(
                principal=request.console.principal, item=validation.produce_item(item, "message")
            )
        except MQError as exc:
            errors, status = form_errors(exc, form), exc.status
        else:
            added = (_("Added message %(id)s to %(to)s (duplicate: the stored message is shown).") if first.duplicate
                     else _("Added message %(id)s to %(to)s."))
            flash.success(request, added % {"id": first.id, "to": f"{first.topic}/{first.group}"})
            if not form["group"] and services.publish_notes([validation.produce_item(item, "message")], [first]):
                flash.warning(request, _(
                    "No group is subscribed to topic %(topic)s: the message waits in group default, which a group "
                    "subscribing later does not take over. Move it from the topic's page once a group subscribes."
                ) % {"topic": first.topic})
            return htmx_redirect(request, reverse("console:message", args=[first.id]))
    return render_page(request, "messages/add.html", {"form": form, "errors": errors, "topics": visible_topic_names(request)},
                       status=status)


# --- activity ----------------------------------------------------------------------------


@console_view(ConsoleRole.VIEWER)
@reads_replica
def scheduled(request: HttpRequest) -> HttpResponse:
    rows = selectors.messages_scheduled(principal=request.console.principal)
    return render_page(request, "messages/activity_list.html", {"rows": rows, "title": _("Scheduled messages"),
                                                                "what": _("NEW messages due later, soonest first")})


@console_view(ConsoleRole.VIEWER)
@reads_replica
def retrying(request: HttpRequest) -> HttpResponse:
    rows = selectors.messages_retrying(principal=request.console.principal)
    return render_page(request, "messages/activity_list.html", {
        "rows": rows, "title": _("Retrying messages"),
        "what": _("delivered before and waiting for their next try (from the newest %(n)s waiting messages)")
        % {"n": selectors.SCAN_BOUND},
    })


@console_view(ConsoleRole.VIEWER)
@reads_replica
def in_flight(request: HttpRequest) -> HttpResponse:
    consumers = selectors.consumers_in_flight(principal=request.console.principal)
    return render_page(request, "messages/in_flight.html", {"consumers": consumers})
