"""Console pages and actions for a topic's consumer groups (its subscriptions): the group page,
and create, pause or resume, change mode and limits, set or clear the subscription filter,
replay from a time, and delete after a confirmation step.

Any role reads; an admin of the topic's business line acts (as for the topic's own pause and
delete). Every change goes through messages/subscriptions.py. Each form is a partial
of topics/groups.html: HTMX swaps it in place (with its inline error, the input kept), a plain
browser gets it on a page of its own.
"""

from __future__ import annotations

import math
import re
from typing import Any

from django.contrib import messages as flash
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_POST

from messages import subscriptions
from messages.delivery.validation import NAME_PATTERN
from messages.routing.filters import filter_parse
from mqcenter.console import (
    fields_checked,
    htmx_redirect,
    int_from_form,
    moment_from_form,
    next_path,
    render_page,
)
from mqcenter.core.auth import Principal
from mqcenter.core.errors import Conflict, InvalidRequest, NotFound
from mqcenter.core.roles import console_principal, console_view
from mqcenter.dashboard import live_group_rows
from mqcenter.models import ConsoleRole
from topics.models import DeliveryMode, Topic
from topics.selectors import group_rows
from topics.views import NEW_GROUP_FORM, topic_for

FORMS = "topics/groups.html"
LIMIT_FIELDS = ("mode", "max_in_flight", "rate_per_second", "key_concurrency", "fair_keys")
CREATE_FIELDS = ("group", "mode", "start", "start_time")
FILTER_FIELDS = ("kind", "tags", "expression")
FILTER_KINDS = ("none", "tags", "expression")


def may_change_groups(request: HttpRequest, topic: Topic) -> bool:
    """Whether the signed-in user may act on the topic's groups: what the templates ask."""
    admin = console_principal(request.user, ConsoleRole.ADMIN)
    return admin is not None and admin.may_biz(topic.biz_id)


@console_view(ConsoleRole.VIEWER)
def topic_group(request: HttpRequest, name: str, group: str) -> HttpResponse:
    topic = topic_for(request.console.principal, name)
    rows = group_rows(topic=topic, name=group)
    if not rows:
        raise NotFound(f"Group {group!r} of topic {name!r} does not exist.")
    # The filter form sits on the page itself and comes back here.
    form = _context(request, topic, group, _filter_values(rows[0]["filter"]))
    return render_page(
        request,
        "topics/group.html",
        {
            **form,
            "next": request.path,
            "group_rows": rows,
            "may_edit": may_change_groups(request, topic),
            **live_group_rows(principal=request.console.principal, topic=topic.name, group=group),
        },
    )


@console_view(ConsoleRole.ADMIN)
def group_create(request: HttpRequest, name: str) -> HttpResponse:
    principal, topic = _admin_topic(request, name)
    context = _context(request, topic, "", dict(NEW_GROUP_FORM))
    if request.method != "POST":
        return _form(request, "create_form", context)
    values = {field: request.POST.get(field, "").strip() for field in CREATE_FIELDS}
    try:
        if not re.fullmatch(NAME_PATTERN, values["group"]):
            raise InvalidRequest(
                _("Use letters, digits and _.:- (1-200 characters), starting with a letter or digit."),
                details={"field": "group"},
            )
        group, job = subscriptions.group_create(
            principal=principal,
            topic=topic,
            name=values["group"],
            mode=values["mode"],
            start=_start(values),
        )
    except (InvalidRequest, Conflict) as exc:
        return _form(request, "create_form", _with_error(context, values, exc), status=exc.status)
    if job is not None:
        flash.success(request, _("Created group %(group)s; its replay runs as job %(job)s.") % {"group": group.name, "job": job})
        return htmx_redirect(request, reverse("console:job", args=[job]))
    flash.success(request, _("Created group %(group)s of topic %(topic)s.") % {"group": group.name, "topic": topic.name})
    return htmx_redirect(request, context["next"])


@require_POST
@console_view(ConsoleRole.ADMIN)
def group_pause(request: HttpRequest, name: str, group: str) -> HttpResponse:
    principal, topic = _admin_topic(request, name)
    paused = request.POST.get("paused") == "1"
    target = next_path(
        request, reverse("console:topic", args=[topic.name])
    )  # before anything changes
    subscriptions.group_update(
        principal=principal, topic=topic, name=group, changes={"paused": paused}
    )
    flash.success(
        request,
        (_("Paused group %(group)s of topic %(topic)s.") if paused else _("Resumed group %(group)s of topic %(topic)s."))
        % {"group": group, "topic": topic.name},
    )
    return htmx_redirect(request, target)


@console_view(ConsoleRole.ADMIN)
def group_limits(request: HttpRequest, name: str, group: str) -> HttpResponse:
    """Mode and flow limits: an empty max in flight or rate lifts that limit."""
    principal, topic = _admin_topic(request, name)
    row = subscriptions.group_get(principal=principal, topic=topic, name=group)
    current = {
        "mode": row.mode,
        "max_in_flight": _shown(row.max_in_flight),
        "rate_per_second": _shown(row.rate_per_second),
        "key_concurrency": _shown(row.key_concurrency),
        "fair_keys": "on" if row.fair_keys else "off",
    }
    context = _context(request, topic, row.name, current)
    if request.method != "POST":
        return _form(request, "limits_form", context)
    values = {field: request.POST.get(field, "").strip() for field in LIMIT_FIELDS}
    wanted, errors = fields_checked({
        "mode": lambda: values["mode"],
        "max_in_flight": lambda: int_from_form(values["max_in_flight"], "max_in_flight", low=1, high=2**31 - 1),
        "rate_per_second": lambda: _rate(values["rate_per_second"]),
        "key_concurrency": lambda: int_from_form(values["key_concurrency"], "key_concurrency", low=1, high=2**31 - 1),
        "fair_keys": lambda: _fair(values["fair_keys"], current=row.fair_keys),
    })
    errors = {**subscriptions.group_settings_errors(wanted), **errors}
    if errors:
        return _form(request, "limits_form", {**context, "values": values, "field_error": errors}, status=400)
    try:
        # Only what changed: saving an unchanged rate would refill its token bucket.
        changes = {field: value for field, value in wanted.items() if value != getattr(row, field)}
        if changes:
            subscriptions.group_update(
                principal=principal, topic=topic, name=row.name, changes=changes
            )
    except InvalidRequest as exc:
        return _form(request, "limits_form", _with_error(context, values, exc), status=exc.status)
    flash.success(request, _("Saved the limits of group %(group)s.") % {"group": row.name})
    return htmx_redirect(request, context["next"])


@console_view(ConsoleRole.ADMIN)
def group_filter(request: HttpRequest, name: str, group: str) -> HttpResponse:
    """Set, change or clear the group's subscription filter: tags (comma separated) or an
    expression. It applies to messages published after the change."""
    principal, topic = _admin_topic(request, name)
    row = subscriptions.group_get(principal=principal, topic=topic, name=group)
    context = _context(request, topic, row.name, _filter_values(row.filter_spec))
    if request.method != "POST":
        return _form(request, "filter_form", context)
    values = {field: request.POST.get(field, "").strip() for field in FILTER_FIELDS}
    try:
        wanted = filter_parse(_filter_from_form(values))
        subscriptions.group_update(principal=principal, topic=topic, name=row.name, changes={"filter": wanted})
    except InvalidRequest as exc:
        return _form(request, "filter_form", _filter_error(context, values, exc), status=exc.status)
    if wanted is None:
        flash.success(request, _("Group %(group)s takes every publish from now on: its filter is removed.") % {"group": row.name})
    else:
        flash.success(request, _("Saved the filter of group %(group)s; it applies to messages published from now on.") % {"group": row.name})
    return htmx_redirect(request, context["next"])


@console_view(ConsoleRole.ADMIN)
def group_replay(request: HttpRequest, name: str, group: str) -> HttpResponse:
    """Deliver the topic's messages since a time to the group again."""
    principal, topic = _admin_topic(request, name)
    row = subscriptions.group_get(principal=principal, topic=topic, name=group)
    context = _context(request, topic, row.name, {"since": ""})
    if request.method != "POST":
        return _form(request, "replay_form", context)
    values = {"since": request.POST.get("since", "").strip()}
    try:
        moment = moment_from_form(values["since"], "since")
        if moment is None:
            raise InvalidRequest(_("Give the time to replay from."), details={"field": "since"})
        since = subscriptions.start_parse(moment.isoformat(), field="since")
        if isinstance(since, str):
            raise InvalidRequest(_("since must be a date and time."), details={"field": "since"})
        job = subscriptions.group_replay(
            principal=principal, topic=topic, name=row.name, since=since
        )
    except InvalidRequest as exc:
        return _form(request, "replay_form", _with_error(context, values, exc), status=exc.status)
    if job is not None:
        flash.success(request, _("The replay into group %(group)s runs as job %(job)s.") % {"group": row.name, "job": job})
        return htmx_redirect(request, reverse("console:job", args=[job]))
    flash.success(
        request,
        _("Replayed %(topic)s since %(since)s UTC into group %(group)s.")
        % {"topic": topic.name, "since": f"{since:%Y-%m-%d %H:%M:%S}", "group": row.name},
    )
    return htmx_redirect(request, context["next"])


@console_view(ConsoleRole.ADMIN)
def group_delete(request: HttpRequest, name: str, group: str) -> HttpResponse:
    """Asks first (GET, or a POST without `confirm`); deletes on the confirming POST."""
    principal, topic = _admin_topic(request, name)
    row = subscriptions.group_get(principal=principal, topic=topic, name=group)
    context = _context(request, topic, row.name, {})
    if request.method != "POST" or request.POST.get("confirm") != "1":
        status = subscriptions.group_status(topic=topic, group=row)
        return _form(request, "delete_form", {**context, "status": status})
    removed = subscriptions.group_delete(principal=principal, topic=topic, name=row.name)
    flash.success(
        request,
        ngettext(
            "Deleted group %(group)s of topic %(topic)s; %(n)s waiting message removed.",
            "Deleted group %(group)s of topic %(topic)s; %(n)s waiting messages removed.",
            removed,
        )
        % {"group": row.name, "topic": topic.name, "n": removed},
    )
    # Not `next`: that may be the page of the group just deleted.
    return htmx_redirect(request, reverse("console:topic", args=[topic.name]))


def _admin_topic(request: HttpRequest, name: str) -> tuple[Principal, Topic]:
    """The admin principal and the topic, 404 when the topic is another business line's."""
    principal = request.console.principal
    return principal, topic_for(principal, name)


def _context(
    request: HttpRequest, topic: Topic, group: str, values: dict[str, Any]
) -> dict[str, Any]:
    return {
        "topic": topic,
        "group": group,
        "values": values,
        "modes": DeliveryMode.values,
        "next": next_path(request, reverse("console:topic", args=[topic.name])),
        "field_error": {},
        "error": "",
    }


def _with_error(
    context: dict[str, Any], values: dict[str, str], exc: InvalidRequest | Conflict
) -> dict[str, Any]:
    """The form again with what was typed, its error beside the field it concerns."""
    field = exc.details.get("field")
    if field in values:
        return {**context, "values": values, "field_error": {field: exc.message}}
    return {**context, "values": values, "error": exc.message}


def _form(
    request: HttpRequest, partial: str, context: dict[str, Any], *, status: int = 200
) -> HttpResponse:
    """The form alone for HTMX (it replaces itself), else on a page of its own."""
    htmx = getattr(request, "htmx", None)
    if htmx and not htmx.boosted:
        return TemplateResponse(request, f"{FORMS}#{partial}", context, status=status)
    return TemplateResponse(
        request,
        "topics/group_action.html",
        {**context, "form": f"{FORMS}#{partial}"},
        status=status,
    )


def _filter_values(spec: dict[str, Any] | None) -> dict[str, str]:
    """A stored filter as the form shows it."""
    if spec is None:
        return {"kind": "none", "tags": "", "expression": ""}
    if "tags" in spec:
        return {"kind": "tags", "tags": ", ".join(spec["tags"]), "expression": ""}
    return {"kind": "expression", "tags": "", "expression": spec["expression"]}


def _filter_from_form(values: dict[str, str]) -> dict[str, Any] | None:
    """The filter as the API takes it, from the form's kind and its comma-separated tags or
    its expression; the service checks it."""
    if values["kind"] not in FILTER_KINDS:
        raise InvalidRequest(_("Choose no filter, tags or an expression."), details={"field": "kind"})
    if values["kind"] == "none":
        return None
    if values["kind"] == "tags":
        tags = [tag.strip() for tag in values["tags"].split(",") if tag.strip()]
        if not tags:
            raise InvalidRequest(_("Give at least one tag, or choose no filter."), details={"field": "tags"})
        return {"tags": tags}
    if not values["expression"]:
        raise InvalidRequest(_("Give an expression, or choose no filter."), details={"field": "expression"})
    return {"expression": values["expression"]}


def _filter_error(context: dict[str, Any], values: dict[str, str], exc: InvalidRequest) -> dict[str, Any]:
    """The error beside the field it concerns: the service names `filter.tags[2]` (shown as
    that tag) or `filter.expression`, whose parse error also marks the character at its
    position in what was typed."""
    field = str(exc.details.get("field", ""))
    name = field.removeprefix("filter.").split("[")[0]
    if name not in ("tags", "expression"):
        return _with_error(context, values, exc)
    message = exc.message.removeprefix(f"{field}: ")
    index = re.fullmatch(r"filter\.tags\[(\d+)\]", field)
    if index:
        tags = [tag.strip() for tag in values["tags"].split(",") if tag.strip()]
        message = f"{tags[int(index[1])]!r}: {message}"
    shown = {**context, "values": values, "field_error": {name: message}}
    position = exc.details.get("position")
    if name == "expression" and isinstance(position, int):
        text = values["expression"]
        shown["error_at"] = {
            "position": position,
            "before": text[:position],
            "at": text[position : position + 1],
            "after": text[position + 1 :],
        }
    return shown


def _start(values: dict[str, str]) -> Any:
    """`start` from the form: latest, earliest, or the time in `start_time` (UTC)."""
    if values["start"] != "time":
        return subscriptions.start_parse(values["start"] or "latest")
    moment = moment_from_form(values["start_time"], "start_time")
    if moment is None:
        raise InvalidRequest(_("Give the time to start from."), details={"field": "start_time"})
    return subscriptions.start_parse(moment.isoformat(), field="start_time")


def _fair(value: str, *, current: bool) -> bool:
    """The form's fair keys choice: "on" or "off"; left out, the group's current setting."""
    if not value:
        return current
    if value not in ("on", "off"):
        raise InvalidRequest(_("fair_keys must be on or off."), details={"field": "fair_keys"})
    return value == "on"


def _rate(value: str) -> float | None:
    if not value:
        return None
    try:
        rate = float(value)
    except ValueError as exc:
        raise InvalidRequest(
            _("rate_per_second must be a number."), details={"field": "rate_per_second"}
        ) from exc
    if not math.isfinite(rate):
        raise InvalidRequest(
            _("rate_per_second must be a number."), details={"field": "rate_per_second"}
        )
    return rate


def _shown(value: int | float | None) -> str:
    """A limit as the form shows it: empty for none, no trailing `.0` on a whole rate."""
    if value is None:
        return ""
    return f"{value:g}" if isinstance(value, float) else str(value)
