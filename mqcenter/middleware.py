"""Guards for the API surface that must hold before any view runs, and the console's
middleware, which API requests pass by."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import cache
from typing import Any

from csp.constants import HEADER as CSP_HEADER
from csp.middleware import CSPMiddleware
from csp.utils import build_policy
from django.conf import settings
from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.sessions.middleware import SessionMiddleware
from django.http import HttpRequest, HttpResponse
from django.middleware.locale import LocaleMiddleware
from django.utils import translation
from django_htmx.middleware import HtmxMiddleware

from mqcenter.core.errors import INTERNAL_ERROR, error_response, mq_error_from

logger = logging.getLogger(__name__)

API_PREFIXES = ("/api/", "/healthz", "/readyz", "/metrics")


class ApiGuardMiddleware:
    """Keeps the API's promise of an error body and a 4xx/503, never an HTML 500.

    Oversized bodies are refused from their Content-Length before Django reads them, and an
    exception no view handled (the database going away mid-request, for one) is rendered as
    the API.md error body.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.path.startswith(API_PREFIXES):
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
        if not request.path.startswith(API_PREFIXES):
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
        if request.path.startswith(API_PREFIXES):
            translation.activate(settings.LANGUAGE_CODE)
            request.LANGUAGE_CODE = settings.LANGUAGE_CODE
            return
        super().process_request(request)


# --- the console's middleware ---------------------------------------------------------------
# An API request carries a bearer token and JSON, no cookie: a session, the logged-in user,
# flash messages and htmx's headers mean nothing to it, and django-csp built the same policy
# for each answer. Skipping them took a one-message produce from 1,205 to 1,135 µs and
# `/healthz` from 140 to 90 µs (in process, back to back, the two chains alternating).
# CSRF and clickjacking stay whole on every path (cheap, and Django's deploy checks look
# for them by name).


class ConsoleOnly:
    """Mixed in before a Django middleware the console needs and the API does not."""

    get_response: Callable[[HttpRequest], Any]

    def __call__(self, request: HttpRequest) -> Any:
        if request.path.startswith(API_PREFIXES):
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


class ContentSecurityPolicyMiddleware(CSPMiddleware):
    """django-csp's middleware; API answers get the settings' policy as one string built
    once, since none of them uses a nonce or a policy of its own view."""

    def __call__(self, request: HttpRequest) -> Any:
        if not request.path.startswith(API_PREFIXES):
            return super().__call__(request)
        response = self.get_response(request)
        response.headers.setdefault(CSP_HEADER, api_policy())
        return response


@cache
def api_policy() -> str:
    return build_policy()
