"""The one error hierarchy of MQ Center, and its rendering as the API.md error body.

Services raise `MQError` subclasses; the DRF exception handler below (and the API guard
middleware for errors raised before DRF runs) turns every failure into
`{"error": {"code", "message", "details"}}` with a 4xx/503 status, never a 500 page.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError, DataError, InterfaceError, OperationalError
from django.http import Http404, JsonResponse
from rest_framework import exceptions as drf
from rest_framework.response import Response

logger = logging.getLogger(__name__)

UNAVAILABLE_RETRY_AFTER = 2


class MQError(Exception):
    status = 400
    code = "invalid_request"

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}

    def body(self) -> dict[str, Any]:
        return error_body(self.code, self.message, self.details)


class InvalidRequest(MQError):
    status, code = 400, "invalid_request"


class Unauthenticated(MQError):
    status, code = 401, "unauthenticated"


class Forbidden(MQError):
    status, code = 403, "forbidden"


class NotFound(MQError):
    status, code = 404, "not_found"


class Conflict(MQError):
    status, code = 409, "conflict"


class PayloadTooLarge(MQError):
    status, code = 413, "payload_too_large"


class RateLimited(MQError):
    status, code = 429, "rate_limited"


class BacklogFull(MQError):
    """A produce would put a group over its topic's max_backlog (details.retry_after)."""

    status, code = 429, "backlog_full"


class Unavailable(MQError):
    status, code = 503, "unavailable"


# What a request gets when the broker itself failed (a bug, logged): never an HTML 500 page.
INTERNAL_ERROR = ("internal_error", "The broker failed to handle this request.")


def error_body(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details or {}}}


def error_response(
    status: int, code: str, message: str, details: dict[str, Any] | None = None
) -> JsonResponse:
    response = JsonResponse(error_body(code, message, details), status=status)
    if status in (429, 503):
        response["Retry-After"] = str(UNAVAILABLE_RETRY_AFTER)
    return response


def first_validation_error(detail: Any, path: str = "") -> tuple[str, str]:
    """Walk DRF's nested error structure to the first failing field.

    Returns the field path in API.md's notation (`messages[3].data`) and its message.
    """
    if isinstance(detail, dict):
        for key, value in detail.items():
            if key == "non_field_errors":
                return first_validation_error(value, path)
            child = f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else str(key))
            return first_validation_error(value, child)
    if isinstance(detail, list):
        for index, value in enumerate(detail):
            if isinstance(value, dict | list) and value:
                # A list of per-item dicts: DRF gives {} for the valid items.
                if isinstance(value, dict):
                    return first_validation_error(value, f"{path}[{index}]")
                return first_validation_error(value, path)
            if value:
                return path, str(value)
    return path, str(detail)


def database_is_unreachable(exc: BaseException) -> bool:
    """True for errors that mean "the database is down", not "the query is wrong"."""
    return isinstance(exc, OperationalError | InterfaceError)


def mq_error_from(exc: BaseException) -> MQError | None:
    """Translate known exceptions into MQError; None for unexpected ones (real bugs)."""
    if isinstance(exc, MQError):
        return exc
    if isinstance(exc, drf.ValidationError):
        field, message = first_validation_error(exc.detail)
        details = {"field": field} if field else {}
        return InvalidRequest(f"{field}: {message}" if field else message, details=details)
    if isinstance(exc, drf.ParseError):
        return InvalidRequest(str(exc.detail))  # the parser says what is wrong with the body
    if isinstance(exc, drf.NotAuthenticated | drf.AuthenticationFailed):
        return Unauthenticated(str(exc.detail))
    if isinstance(exc, drf.PermissionDenied | DjangoPermissionDenied):
        return Forbidden(str(getattr(exc, "detail", "")) or "This token may not do that.")
    if isinstance(exc, drf.NotFound | Http404):
        return NotFound("No such resource.")
    if isinstance(exc, drf.Throttled):
        return rate_limited(exc.wait)
    if isinstance(exc, RequestDataTooBig):
        return PayloadTooLarge("The request body is larger than this broker accepts.")
    if isinstance(exc, drf.MethodNotAllowed):
        err = MQError(str(exc.detail))
        err.status, err.code = 405, "method_not_allowed"
        return err
    if isinstance(exc, drf.UnsupportedMediaType):
        err = MQError("Send the body as application/json.")
        err.status, err.code = 415, "unsupported_media_type"
        return err
    if isinstance(exc, drf.NotAcceptable):
        err = MQError("This API only answers application/json.")
        err.status, err.code = 406, "not_acceptable"
        return err
    if database_is_unreachable(exc):
        logger.warning("database unavailable: %s", exc)
        return Unavailable("The message store is unavailable; retry shortly.")
    if isinstance(exc, DataError):
        # A value the column cannot hold (out of range, too long) that validation let pass.
        logger.warning("database refused a value: %s", exc)
        return InvalidRequest("A value in this request is out of the range the message store can hold.")
    if isinstance(exc, DatabaseError):
        logger.exception("database error")
        return Unavailable("The message store could not complete the request; retry shortly.")
    return None


def rate_limited(wait: float | None) -> RateLimited:
    """The token's request rate is spent for `wait` more seconds."""
    return RateLimited("Too many requests for this token; retry later.", details={"retry_after": int(wait or 1)})


def retry_after(err: MQError) -> str | None:
    """The Retry-After header an error answers with, if any."""
    if err.status in (429, 503):
        return str(err.details.get("retry_after", UNAVAILABLE_RETRY_AFTER))
    return None


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF exception handler: every known error becomes the API.md error body."""
    err = mq_error_from(exc)
    if err is None:
        return None  # a real bug: let it surface (the guard middleware renders JSON 500)
    response = Response(err.body(), status=err.status)
    header = retry_after(err)
    if header is not None:
        response["Retry-After"] = header
    return response
