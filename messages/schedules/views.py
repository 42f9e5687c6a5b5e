"""Console pages for recurring messages (schedules). Thin doors: every write goes through
messages/schedules/services.py."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages as flash
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from messages.schedules import services as schedules
from messages.schedules.cron import cron_next_runs
from mqcenter.console import form_errors, htmx_redirect, json_from_form, render_page
from mqcenter.core.errors import InvalidRequest, MQError
from mqcenter.core.roles import console_principal, console_view
from mqcenter.models import ConsoleRole

FORM_FIELDS = ("name", "topic", "group", "data", "cron", "timezone")


@console_view(ConsoleRole.VIEWER)
def schedule_list(request: HttpRequest) -> HttpResponse:
    """Every visible schedule with its next and last runs; operators create one here."""
    operator = console_principal(request.user, ConsoleRole.OPERATOR)
    form: dict[str, Any] = {"name": "", "topic": "", "group": "", "data": "{}", "cron": "0 * * * *",
                            "timezone": "UTC", "enabled": True}
    errors: dict[str, str] = {}
    status = 200
    if request.method == "POST":
        if operator is None:
            return HttpResponse(_("Operators only."), status=403)
        form = _form(request)
        fields, errors = _checked(form)
        status = 400 if errors else 200
        if not errors:
            try:
                schedule = schedules.schedule_create(principal=operator, fields=fields)
            except MQError as exc:
                errors, status = form_errors(exc, FORM_FIELDS), exc.status
            else:
                flash.success(request, _("Created schedule %(name)s.") % {"name": schedule.name})
                return htmx_redirect(request, reverse("console:schedules"))
    rows = schedules.schedules_list(principal=request.console.principal)
    return render_page(request, "messages/schedules.html", {
        "rows": rows, "form": form, "errors": errors, "may_write": operator is not None,
    }, status=status)


@console_view(ConsoleRole.OPERATOR)
def schedule_edit(request: HttpRequest, schedule_id: int) -> HttpResponse:
    principal = request.console.principal
    schedule = schedules.schedule_get(principal=principal, schedule_id=schedule_id)
    as_dict = schedules.schedule_dict(schedule)
    form: dict[str, Any] = {**as_dict, "group": as_dict["group"] or "", "data": json.dumps(as_dict["data"], indent=2)}
    errors: dict[str, str] = {}
    status = 200
    if request.method == "POST":
        form = _form(request)
        fields, errors = _checked(form)
        status = 400 if errors else 200
        if not errors:
            try:
                schedules.schedule_update(principal=principal, schedule_id=schedule_id, fields=fields)
            except MQError as exc:
                errors, status = form_errors(exc, FORM_FIELDS), exc.status
            else:
                flash.success(request, _("Saved schedule %(name)s.") % {"name": form["name"]})
                return htmx_redirect(request, reverse("console:schedules"))
    return render_page(request, "messages/schedule_edit.html", {"schedule": schedule, "form": form, "errors": errors},
                       status=status)


@require_POST
@console_view(ConsoleRole.OPERATOR)
def schedule_action(request: HttpRequest, schedule_id: int, action: str) -> HttpResponse:
    """Run now, enable, disable or delete one schedule."""
    principal = request.console.principal
    if action == "run":
        result = schedules.schedule_run(principal=principal, schedule_id=schedule_id)
        flash.success(request, _("Produced message %(id)s.") % {"id": result.id})
    elif action == "delete":
        schedules.schedule_delete(principal=principal, schedule_id=schedule_id)
        flash.success(request, _("Deleted the schedule."))
    else:
        schedules.schedule_update(principal=principal, schedule_id=schedule_id, fields={"enabled": action == "enable"})
        flash.success(request, _("Schedule enabled.") if action == "enable" else _("Schedule disabled."))
    return htmx_redirect(request, reverse("console:schedules"))


def _form(request: HttpRequest) -> dict[str, Any]:
    form: dict[str, Any] = {name: request.POST.get(name, "").strip() for name in FORM_FIELDS}
    form["enabled"] = request.POST.get("enabled") == "on"
    return form


def _checked(form: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The schedule's fields from the form, and every field's error at once."""
    fields: dict[str, Any] = {"name": form["name"], "topic": form["topic"], "group": form["group"] or None,
                              "cron": form["cron"], "timezone": form["timezone"] or "UTC", "enabled": form["enabled"]}
    errors: dict[str, str] = {}
    try:
        fields["data"] = json_from_form(form["data"], "data")
    except InvalidRequest as exc:
        errors["data"] = exc.message
    errors.update(schedules.schedule_errors(fields=fields))
    return fields, errors


@console_view(ConsoleRole.VIEWER)
def schedule_preview(request: HttpRequest) -> HttpResponse:
    """The next runs of the cron being typed, in its time zone (or what is wrong with it)."""
    cron, zone = request.GET.get("cron", ""), request.GET.get("timezone", "").strip() or "UTC"
    errors = schedules.schedule_errors(fields={"cron": cron, "timezone": zone})
    runs = [] if errors else cron_next_runs(cron, zone, after=timezone.now())
    return render_page(request, "messages/_cron_preview.html", {"runs": runs, "zone": zone, "errors": errors})
