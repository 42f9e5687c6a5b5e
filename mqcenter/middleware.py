"""Guards for the API surface that must hold before any view runs, and the console's
middleware, which API requests pass by."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from csp.constants import HEADER as CSP_HEADER
from csp.constants import HEADER_REPORT_ONLY as CSP_HEADER_REPORT_ONLY
from csp.middleware import CSPMiddleware
from csp.utils import build_policy
from django.conf import settings
from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.sessions.middleware import SessionMiddleware
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.middleware.locale import LocaleMiddleware
from django.utils import translation
from django_htmx.middleware import HtmxMiddleware

from mqcenter.core.errors import INTERNAL_ERROR, error_response, mq_error_from

logger = logging.getLogger(__name__)

API_PREFIXES = ("/api/", "/healthz", "/readyz", "/metrics")


def is_api_request(request: HttpRequest) -> bool:
    """The API surface: token-authenticated JSON, English, no console state."""
    return request.path.startswith(API_PREFIXES)


class ApiGuardMiddleware:
    """Keeps the API's promise of an error body and a 4xx/503, never an HTML 500.

    Oversized bodies are refused from their Content-Length before Django reads them, and an
    exception no view handled (the database going away mid-request, for one) is rendered as
    the API.md error body.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not is_api_request(request):
            return self.get_response(request)
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return error_response(400, "invalid_request", "Content-Length is not a number.")
        if length > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
            return error_response(
                413,
                "payload_too_large",
                f"The request body is {length} bytes; this broker accepts at most "
                f"{settings.DATA_UPLOAD_MAX_MEMORY_SIZE}.",
            )
        response = self.get_response(request)
        if response.status_code == 404 and not response.get("Content-Type", "").startswith(
            "application/json"
        ):
            return error_response(404, "not_found", "No such endpoint.")
        return response

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if not is_api_request(request):
            return None
        err = mq_error_from(exc)
        if err is not None:
            return error_response(err.status, err.code, err.message, err.details)
        logger.exception("unhandled error on %s", request.path)
        return error_response(500, *INTERNAL_ERROR)


class ConsoleLocaleMiddleware(LocaleMiddleware):
    """Django's LocaleMiddleware for the console; the API surface always runs in English.

    API clients parse error messages and DRF's own messages are translated too, so an
    Accept-Language header must not change them.
    """

    def process_request(self, request: HttpRequest) -> None:
        if is_api_request(request):
            translation.activate(settings.LANGUAGE_CODE)
            request.LANGUAGE_CODE = settings.LANGUAGE_CODE
            return
        super().process_request(request)


# --- the console's middleware ---------------------------------------------------------------
# An API request carries a bearer token and JSON, no cookie: a session, the logged-in user,
# flash messages and htmx's headers mean nothing to it, and the CSP of its answer is the
# same string every time. Passing them by saves 50-120 us of a one-message produce's ~1.2 ms
# and takes `/healthz` from ~135 to ~86 us (in process, back to back). CSRF and
# clickjacking stay whole on every path (cheap, and Django's deploy checks look for them
# by name).


class ConsoleOnly:
    """Mixed in before a Django middleware the console needs and the API does not. Only
    `__call__` is gated: the middlewares it is mixed into have no view, exception or
    template-response hooks."""

    get_response: Callable[[HttpRequest], Any]

    def __call__(self, request: HttpRequest) -> Any:
        if is_api_request(request):
            return self.get_response(request)
        return super().__call__(request)  # type: ignore[misc]


class ConsoleSessionMiddleware(ConsoleOnly, SessionMiddleware):
    pass


class ConsoleAuthenticationMiddleware(ConsoleOnly, AuthenticationMiddleware):
    pass


class ConsoleMessageMiddleware(ConsoleOnly, MessageMiddleware):
    pass


class ConsoleHtmxMiddleware(ConsoleOnly, HtmxMiddleware):
    pass


class ApiCspMiddleware(CSPMiddleware):
    """django-csp's middleware, which builds each answer's policy; API answers use no nonce
    and no view's own policy, so they get the settings' policies as built at start-up."""

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        super().__init__(get_response)
        self.api_policies = {CSP_HEADER: build_policy(), CSP_HEADER_REPORT_ONLY: build_policy(report_only=True)}

    def process_request(self, request: HttpRequest) -> None:
        if not is_api_request(request):
            super().process_request(request)

    def process_response(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        if not is_api_request(request):
            return super().process_response(request, response)
        for header, policy in self.api_policies.items():
            if policy:
                response.headers.setdefault(header, policy)
        return response
