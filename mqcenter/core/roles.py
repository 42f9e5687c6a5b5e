"""Console roles and grants, and the one door every console view goes through.

A user holds grants `(role, biz)`: viewer < operator < admin, each on one business line or
(biz empty) on all of them; Django superusers are global admins. For an action that needs
role R, the user's reach is the business lines of the grants at R or above — so a viewer of
`shop` who operates `billing` reads both and changes only `billing`.

`console_view(role)` wraps every console view and HTMX partial: it logs the user in (or
sends them to the login page), turns them into a `Principal` the services accept, refuses
users without the role, and renders `MQError`s as pages (or HTMX fragments). A console URL
whose view lacks it fails `tests/mqcenter/test_console_pages.py`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import urlencode
from django.utils.translation import gettext as _

from mqcenter.core.audit import audit_record
from mqcenter.core.auth import Principal
from mqcenter.core.errors import Conflict, Forbidden, InvalidRequest, MQError
from mqcenter.models import ConsoleGrant, ConsoleRole

logger = logging.getLogger(__name__)

ROLE_LEVELS = {ConsoleRole.VIEWER: 1, ConsoleRole.OPERATOR: 2, ConsoleRole.ADMIN: 3}
PUBLIC = "public"  # marks the login page: the only console view open to anonymous users
LOGIN_ONLY = "login"  # marks views any signed-in user may use (password change, logout)


@dataclass(frozen=True)
class ConsoleAccess:
    """What the signed-in user may do: `principal` for the role the view needs, and the
    highest role they hold anywhere (navigation shows what that role can reach)."""

    user: Any
    principal: Principal
    top_role: str | None
    global_admin: bool

    def has(self, role: str) -> bool:
        return self.top_role is not None and ROLE_LEVELS[self.top_role] >= ROLE_LEVELS[role]


def console_principal(user: Any, role: str) -> Principal | None:
    """The Principal a user acts as for an action needing `role`, or None without that role.

    Scopes are ("admin",) so the API's services accept the user; the business-line reach
    and the role check here are what limit them.
    """
    if user is None or not user.is_authenticated or not user.is_active:
        return None
    name = f"user:{user.get_username()}"
    if user.is_superuser:
        return Principal(name=name, scopes=("admin",), biz_ids=None)
    wanted = [r for r, level in ROLE_LEVELS.items() if level >= ROLE_LEVELS[role]]
    grants = list(ConsoleGrant.objects.filter(user=user, role__in=wanted).values_list("biz_id", flat=True))
    if not grants:
        return None
    biz_ids = None if None in grants else frozenset(grants)
    return Principal(name=name, scopes=("admin",), biz_ids=biz_ids)


def console_top_role(user: Any) -> str | None:
    if user.is_superuser:
        return ConsoleRole.ADMIN
    roles = set(ConsoleGrant.objects.filter(user=user).values_list("role", flat=True))
    return max(roles, key=lambda r: ROLE_LEVELS[r], default=None)


def console_access(user: Any, role: str) -> ConsoleAccess | None:
    principal = console_principal(user, role)
    if principal is None:
        return None
    top = console_top_role(user)
    admin = console_principal(user, ConsoleRole.ADMIN)
    return ConsoleAccess(user=user, principal=principal, top_role=top,
                         global_admin=admin is not None and admin.biz_ids is None)


def console_view(role: str, *, global_admin: bool = False) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """Guard a console view: sign-in, role, reach; sets `request.console` (ConsoleAccess).

    `role` is "viewer", "operator" or "admin"; LOGIN_ONLY for pages of one's own account;
    PUBLIC for the login page. `global_admin` also demands an unrestricted admin grant.
    """

    def wrap(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @functools.wraps(view)
        def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if role != PUBLIC:
                user = request.user
                if not user.is_authenticated:
                    return _to_login(request)
                need = ConsoleRole.VIEWER if role == LOGIN_ONLY else role
                access = console_access(user, need)
                if access is None and role != LOGIN_ONLY:
                    return error_page(request, 403, _("You do not have the role for this page or action."))
                if role != LOGIN_ONLY and global_admin and not (access and access.global_admin):
                    return error_page(request, 403, _("Only an unrestricted admin may do this."))
                request.console = access  # type: ignore[attr-defined]
            try:
                return view(request, *args, **kwargs)
            except MQError as exc:
                return error_page(request, exc.status, exc.message)

        guarded.console_role = role  # type: ignore[attr-defined]
        return guarded

    return wrap


def _to_login(request: HttpRequest) -> HttpResponse:
    url = f"{reverse('console:login')}?{urlencode({'next': request.get_full_path()})}"
    if getattr(request, "htmx", False):
        response = HttpResponse(status=401)
        response["HX-Redirect"] = url
        return response
    return redirect(url)


def error_page(request: HttpRequest, status: int, message: str) -> HttpResponse:
    """An error as a page, or for HTMX as a flash message swapped into #flash."""
    if getattr(request, "htmx", False):
        response = TemplateResponse(request, "console/error.html#flash", {"message": message}, status=status)
        response["HX-Retarget"] = "#flash"
        response["HX-Reswap"] = "innerHTML"
        return response
    return TemplateResponse(request, "console/error.html", {"message": message, "status": status}, status=status)


# --- users and grants (services) ---------------------------------------------------------


def console_user_create(
    *, actor: Principal, username: str, password: str, email: str = "", role: str = "", biz: Any = None
) -> User:
    """Create a console user, with a first grant when `role` is given: both or neither."""
    from django.contrib.auth.password_validation import validate_password
    from django.core.exceptions import ValidationError

    username = username.strip()
    if not username:
        raise InvalidRequest("A username is required.", details={"field": "username"})
    for field, value in (("username", username), ("email", email)):
        try:
            User._meta.get_field(field).clean(value, None)  # length and characters, as the column holds them
        except ValidationError as exc:
            raise InvalidRequest(" ".join(exc.messages), details={"field": field}) from exc
    if role and role not in ROLE_LEVELS:
        raise InvalidRequest(f"Unknown role {role!r}.", details={"field": "role"})
    try:
        validate_password(password, User(username=username, email=email))
    except ValidationError as exc:
        raise InvalidRequest(" ".join(exc.messages), details={"field": "password"}) from exc
    try:
        with transaction.atomic():
            user = User.objects.create_user(username=username, password=password, email=email)
            audit_record(actor=actor.name, action="user.create", target=user, after={"username": username, "email": email})
            if role:
                console_grant_add(actor=actor, user=user, role=role, biz=biz)
    except IntegrityError as exc:
        raise Conflict(f"User {username!r} already exists.", details={"field": "username"}) from exc
    return user


def console_user_set_active(*, actor: Principal, user: User, active: bool) -> User:
    if user.is_superuser and not active:
        raise Forbidden("Superusers are managed with manage.py, not the console.")
    with transaction.atomic():
        before = {"is_active": user.is_active}
        user.is_active = active
        user.save(update_fields=["is_active"])
        audit_record(actor=actor.name, action="user.update", target=user, before=before, after={"is_active": active})
    return user


def console_grant_add(*, actor: Principal, user: User, role: str, biz: Any = None) -> ConsoleGrant:
    if role not in ROLE_LEVELS:
        raise InvalidRequest(f"Unknown role {role!r}.", details={"field": "role"})
    with transaction.atomic():
        grant, created = ConsoleGrant.objects.get_or_create(user=user, role=role, biz=biz)
        if created:
            audit_record(actor=actor.name, action="grant.add", target=grant,
                         after={"user": user.username, "role": role, "biz": biz.name if biz else None})
    return grant


def console_grant_remove(*, actor: Principal, grant: ConsoleGrant) -> None:
    with transaction.atomic():
        audit_record(actor=actor.name, action="grant.remove", target=grant,
                     before={"user": grant.user.username, "role": grant.role,
                             "biz": grant.biz.name if grant.biz_id else None})
        grant.delete()
