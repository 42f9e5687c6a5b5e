"""Console pages of the site itself: log in/out, password, dashboard, users and grants,
audit log. Every view is wrapped in `console_view` (see mqcenter/core/roles.py)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages as flash
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse, reverse_lazy
from django.utils.translation import gettext as _

from messages.operations.models import BulkJob
from mqcenter.audit_display import audit_changes, audit_target
from mqcenter.console import form_errors, htmx_redirect, int_from_form, query_string, render_page
from mqcenter.core.db import reads_replica
from mqcenter.core.errors import InvalidRequest, MQError
from mqcenter.core.login_throttle import (
    WINDOW_SECONDS,
    login_attempt_admit,
    login_success_record,
)
from mqcenter.core.proxies import client_address
from mqcenter.core.roles import (
    LOGIN_ONLY,
    PUBLIC,
    console_grant_add,
    console_grant_remove,
    console_user_create,
    console_user_set_active,
    console_view,
)
from mqcenter.dashboard import dashboard_summary
from mqcenter.models import AuditEntry, ConsoleGrant, ConsoleRole
from topics.models import Biz


class ThrottledAuthenticationForm(AuthenticationForm):
    """Django's login form, refusing usernames and addresses with too many recent failures."""

    throttled = False

    def clean(self) -> dict[str, Any]:
        username = self.cleaned_data.get("username") or ""
        address = client_address(self.request) if self.request else ""
        if not login_attempt_admit(username=username, address=address):
            self.throttled = True
            raise ValidationError("Too many failed logins. Wait 15 minutes and try again.", code="throttled")
        cleaned = super().clean()
        login_success_record(username=username, address=address)
        return cleaned


class ThrottledLoginView(auth_views.LoginView):
    authentication_form = ThrottledAuthenticationForm
    template_name = "console/login.html"
    redirect_authenticated_user = True

    def form_invalid(self, form: ThrottledAuthenticationForm) -> HttpResponse:  # type: ignore[override]
        response = super().form_invalid(form)
        if form.throttled:
            response.status_code = 429
            response["Retry-After"] = str(WINDOW_SECONDS)
        return response


login = console_view(PUBLIC)(ThrottledLoginView.as_view())
logout = console_view(PUBLIC)(auth_views.LogoutView.as_view())
password_change = console_view(LOGIN_ONLY)(
    auth_views.PasswordChangeView.as_view(
        template_name="console/password_change.html", success_url=reverse_lazy("console:password_change_done"),
    )
)
password_change_done = console_view(LOGIN_ONLY)(
    auth_views.PasswordChangeDoneView.as_view(template_name="console/password_change.html", extra_context={"done": True})
)


@console_view(ConsoleRole.VIEWER)
@reads_replica
def dashboard(request: HttpRequest) -> HttpResponse:
    window = request.GET.get("window", "hour")
    summary = dashboard_summary(principal=request.console.principal, window=window)
    return render_page(request, "console/dashboard.html", {"d": summary}, partial="live")


# --- users and grants --------------------------------------------------------------------


USER_FORM_FIELDS = ("username", "email", "role", "biz")


@console_view(ConsoleRole.ADMIN, global_admin=True)
def users(request: HttpRequest) -> HttpResponse:
    actor = request.console.principal
    errors: dict[str, str] = {}
    typed = {name: request.POST.get(name, "").strip() for name in USER_FORM_FIELDS}  # never the password
    if request.method == "POST":
        try:
            role = request.POST.get("role", "")
            user = console_user_create(
                actor=actor, username=request.POST.get("username", ""), password=request.POST.get("password", ""),
                email=request.POST.get("email", "").strip(), role=role,
                biz=_biz(request.POST.get("biz")) if role else None,
            )
        except MQError as exc:
            errors = form_errors(exc, (*USER_FORM_FIELDS, "password"))
        else:
            flash.success(request, _("Created user %(name)s.") % {"name": user.username})
            return htmx_redirect(request, reverse("console:user", args=[user.id]))
    rows = User.objects.prefetch_related("console_grants__biz").order_by("username")[:1000]
    return render_page(request, "console/users.html", {
        "users": rows, "errors": errors, "typed": typed, "roles": ConsoleRole.values, "biz_choices": Biz.objects.all(),
    }, status=400 if errors else 200)


def _biz(value: str | None) -> Biz | None:
    if not value:
        return None
    biz = Biz.objects.filter(id=int_from_form(value, "biz")).first()
    if biz is None:
        raise InvalidRequest(_("No such business line."), details={"field": "biz"})
    return biz


@console_view(ConsoleRole.ADMIN, global_admin=True)
def user_detail(request: HttpRequest, user_id: int) -> HttpResponse:
    actor = request.console.principal
    user = get_object_or_404(User, id=user_id)
    if request.method == "POST":
        op = request.POST.get("op")
        if op == "grant":
            console_grant_add(actor=actor, user=user, role=request.POST.get("role", ""), biz=_biz(request.POST.get("biz")))
            flash.success(request, _("Grant added."))
        elif op == "revoke":
            grant = get_object_or_404(ConsoleGrant, id=int_from_form(request.POST.get("grant"), "grant"), user=user)
            console_grant_remove(actor=actor, grant=grant)
            flash.success(request, _("Grant removed."))
        elif op in ("activate", "deactivate"):
            console_user_set_active(actor=actor, user=user, active=op == "activate")
            done = _("User %(name)s activated.") if op == "activate" else _("User %(name)s deactivated.")
            flash.success(request, done % {"name": user.username})
        else:
            raise InvalidRequest(_("Unknown operation."))
        return htmx_redirect(request, reverse("console:user", args=[user.id]))
    return render_page(request, "console/user.html", {
        "u": user, "grants": user.console_grants.select_related("biz").order_by("role"),
        "roles": ConsoleRole.values, "biz_choices": Biz.objects.all(),
    })


# --- audit -------------------------------------------------------------------------------


@console_view(ConsoleRole.ADMIN, global_admin=True)
@reads_replica
def audit(request: HttpRequest) -> HttpResponse:
    """Every operator and admin action, newest first, keyset-paginated on id."""
    params = {k: request.GET.get(k, "").strip() for k in ("actor", "action", "target") if request.GET.get(k, "").strip()}
    rows = AuditEntry.objects.all()
    if "actor" in params:
        rows = rows.filter(actor=params["actor"])
    if "action" in params:
        rows = rows.filter(action__startswith=params["action"])
    if "target" in params:  # a name ("orders") or an id ("1017")
        rows = rows.filter(Q(target_id=params["target"]) | Q(target_name=params["target"]))
    before = int_from_form(request.GET.get("before"), "before")
    if before:
        rows = rows.filter(id__lt=before)
    page = list(rows.order_by("-id")[:51])
    older = query_string(params, before=page[49].id) if len(page) > 50 else None
    jobs = {str(j.id): j for j in BulkJob.objects.filter(
        id__in=[int(e.target_id) for e in page if e.target_type == "BulkJob" and e.target_id.isdigit()])}
    entries = []
    for entry in page[:50]:
        name, link = audit_target(entry)
        entries.append({"e": entry, "name": name, "link": link, "changes": audit_changes(entry.before, entry.after),
                        "job": jobs.get(entry.target_id) if entry.target_type == "BulkJob" else None})
    return render_page(request, "console/audit.html", {"entries": entries, "params": params, "older_url": older})
