"""Guards for the API surface that must hold before any view runs."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.middleware.locale import LocaleMiddleware
from django.utils import translation

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
