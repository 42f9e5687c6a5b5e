"""Small helpers the console views share: page-or-partial rendering and form parsing."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.utils.translation import gettext as _

from mqcenter.core.dates import parse_iso_datetime
from mqcenter.core.errors import InvalidRequest, MQError


def render_page(
    request: HttpRequest,
    template: str,
    context: dict[str, Any],
    *,
    partial: str | None = None,
    status: int = 200,
) -> TemplateResponse:
    """The full page, or only `template#partial` when HTMX asks for that element."""
    htmx = getattr(request, "htmx", None)
    if partial and htmx and not htmx.boosted and htmx.target == partial:
        return TemplateResponse(request, f"{template}#{partial}", context, status=status)
    return TemplateResponse(request, template, context, status=status)


def next_path(request: HttpRequest, default: str) -> str:
    """The form's `next` when it is a path of this site, else `default`: never another site,
    never a header-splitting value."""
    target = request.POST.get("next") or request.GET.get("next") or ""
    if (
        "\r" in target
        or "\n" in target
        or not target.startswith("/")
        or target.startswith("//")
        or not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()})
    ):
        return default
    return target


def htmx_redirect(request: HttpRequest, url: str) -> HttpResponse:
    """Redirect a plain form post (303) or an HTMX request (HX-Redirect)."""
    if getattr(request, "htmx", False):
        response = HttpResponse(status=204)
        response["HX-Redirect"] = url
        return response
    response = HttpResponse(status=303)
    response["Location"] = url
    return response


def moment_from_form(value: str | None, field: str) -> datetime | None:
    """A datetime from an <input type=datetime-local> (read as UTC) or ISO 8601 text."""
    value = (value or "").strip()
    if not value:
        return None
    parsed = parse_iso_datetime(value)
    if parsed is None:
        raise InvalidRequest(_("%(field)s is not a date and time.") % {"field": field}, details={"field": field})
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def datetime_local(value: datetime | None) -> str:
    """The value an <input type=datetime-local step=1> shows for a UTC datetime."""
    if value is None:
        return ""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def json_from_form(value: str | None, field: str) -> Any:
    """A JSON value typed into a console form: strict JSON that the broker can store (no NaN
    or Infinity, no number beyond a float, no lone UTF-16 surrogate escape, not nested too
    deeply), else InvalidRequest naming the field. Empty means null."""
    try:
        data = json.loads(value or "null", parse_constant=_no_constant)
        json.dumps(data, allow_nan=False, ensure_ascii=False).encode()  # what storing it needs
    except (ValueError, RecursionError) as exc:  # UnicodeEncodeError is a ValueError
        raise InvalidRequest(_("%(field)s must be valid JSON of Unicode text (no NaN or Infinity).") % {"field": field},
                             details={"field": field}) from exc
    return data


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def int_from_form(
    value: str | None, field: str, *, low: int = 0, high: int = 10**9, default: int | None = None
) -> int | None:
    value = (value or "").strip()
    if not value:
        return default
    try:
        number = int(value)
    except ValueError as exc:
        raise InvalidRequest(_("%(field)s must be a whole number.") % {"field": field}, details={"field": field}) from exc
    if not low <= number <= high:
        raise InvalidRequest(
            _("%(field)s must be between %(low)s and %(high)s.") % {"field": field, "low": low, "high": high},
            details={"field": field},
        )
    return number


def fields_checked(checks: dict[str, Callable[[], Any]]) -> tuple[dict[str, Any], dict[str, str]]:
    """Run every field's check: the values of those that pass and the message of each that
    fails, keyed by field, so a form shows every error at once instead of the first."""
    values: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for field, check in checks.items():
        try:
            values[field] = check()
        except InvalidRequest as exc:
            errors[field] = exc.message
    return values, errors


def query_string(params: dict[str, Any], **changes: Any) -> str:
    """`?a=1&b=2` from params with changes applied; empty values are left out."""
    merged = {**params, **changes}
    clean = {k: v for k, v in merged.items() if v not in (None, "", [], ())}
    return f"?{urlencode(clean, doseq=True)}" if clean else "?"


def form_errors(exc: MQError, fields: Iterable[str]) -> dict[str, str]:
    """`exc`'s message keyed by the form field it names (details.field, in API.md's
    notation: `message.data`, `groups[0].mode`), so the page shows it beside that field;
    under "form" (shown above the form) when it names none of `fields`."""
    named = str(exc.details.get("field") or "")
    field = named.rsplit(".", 1)[-1].split("[", 1)[0]
    return {field if field in set(fields) else "form": exc.message}
