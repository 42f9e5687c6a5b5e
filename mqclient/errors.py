"""The SDK's exceptions.

Two families, kept apart on purpose because callers must treat them differently:

* :class:`APIError` and its subclasses: the broker *answered* and said no (a 4xx, or a 5xx
  that retries could not get past). They carry the API.md error ``code``, ``message`` and
  ``details`` so a caller can branch on the code instead of parsing text.
* :class:`BrokerUnavailable`: no broker answered usefully within the retry budget. The
  request may or may not have been applied; for produce, the SDK's ``dedup_key`` makes a
  later retry by the caller safe.

:class:`Reject` is not an error of the SDK at all: a consumer handler raises it to say
"this message can never succeed, do not retry it".
"""

from __future__ import annotations

from typing import Any


class MQClientError(Exception):
    """Base class of every exception the SDK raises itself."""


class ConfigurationError(MQClientError):
    """The client was set up wrongly (no brokers, bad environment value, ...)."""


class APIError(MQClientError):
    """The broker answered with an API.md error body.

    ``status`` is the HTTP status, ``code`` the API.md code (``invalid_request``, ...),
    ``details`` the optional object that names the failing field.
    """

    status: int
    code: str
    message: str
    details: dict[str, Any]

    def __init__(
        self,
        *,
        status: int,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{code} ({status}): {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}
        self.retry_after = retry_after

    @property
    def field(self) -> str | None:
        """The failing field named by ``details.field``, e.g. ``messages[3].data``."""
        value = self.details.get("field")
        return value if isinstance(value, str) else None


class InvalidRequest(APIError):
    """400 ``invalid_request``: fix the request, retrying will not help."""


class Unauthenticated(APIError):
    """401: the token is missing or unknown."""


class Forbidden(APIError):
    """403: the token does not carry a scope for this topic or action."""


class NotFound(APIError):
    """404."""


class Conflict(APIError):
    """409."""


class Duplicate(Conflict):
    """409 ``duplicate``: a message asked ``dedup_conflict="reject"`` and its ``dedup_key`` is
    taken; ``details["first_id"]`` is the message holding it (None: an earlier message of the
    same call). Nothing of the call was stored."""


class PayloadTooLarge(APIError):
    """413: a message's ``data`` or the whole request is over the broker's limit."""


class RateLimited(APIError):
    """429 after the retry budget ran out (the SDK retries 429 honouring ``Retry-After``)."""


class BacklogFull(RateLimited):
    """429 ``backlog_full`` after the retry budget ran out: a group of the topic held its
    ``max_backlog`` of waiting messages the whole time, and nothing of the batch was stored.
    ``details`` names the ``topic``, ``group`` and ``max_backlog``."""


class ServerError(APIError):
    """503/5xx after the retry budget ran out."""


_BY_CODE: dict[str, type[APIError]] = {
    "invalid_request": InvalidRequest,
    "unauthenticated": Unauthenticated,
    "forbidden": Forbidden,
    "not_found": NotFound,
    "conflict": Conflict,
    "duplicate": Duplicate,
    "payload_too_large": PayloadTooLarge,
    "rate_limited": RateLimited,
    "backlog_full": BacklogFull,
    "unavailable": ServerError,
}

_BY_STATUS: dict[int, type[APIError]] = {
    400: InvalidRequest,
    401: Unauthenticated,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    429: RateLimited,
}


def api_error_class(status: int, code: str) -> type[APIError]:
    """Pick the most specific exception class for an error answer.

    The code wins over the status so that a broker adding new status/code pairs still maps to
    something sensible; unknown 5xx are :class:`ServerError`, unknown 4xx plain :class:`APIError`.
    """
    if code in _BY_CODE:
        return _BY_CODE[code]
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    if status >= 500:
        return ServerError
    return APIError


class BrokerUnavailable(MQClientError):
    """Every known broker failed (connection error, timeout, 5xx) until the retry budget ran out.

    ``last_error`` is the last failure seen, for the log.
    """

    def __init__(self, message: str, *, last_error: BaseException | None = None) -> None:
        super().__init__(message)
        self.last_error = last_error


class BufferFull(MQClientError):
    """The batching producer's buffer stayed full for the whole ``block_timeout``.

    Raised to the caller instead of dropping the message: back-pressure, never a silent drop.
    """


class ProducerClosed(MQClientError):
    """A message was submitted to a batching producer after :meth:`close`."""


class Reject(Exception):
    """Raise from a consumer handler to fail the message permanently: no retry.

    The runner acks it as ``FAIL`` with ``"retry": false``, so the broker moves it straight to
    the dead letters (``FAIL``) even if retries remain. Any other exception is an ordinary
    failure and is retried per the topic's policy.
    """


#: Alias for readers who look for the longer name.
PermanentFailure = Reject


class Snooze(Exception):
    """Raise from a consumer handler to have the message delivered again after ``seconds``,
    spending no retry (the ack's ``status: RETRY`` with ``delay_seconds``).

    For work that is not ready yet (a resource busy, a rate limit of a downstream service).
    The broker bounds the delay (``MQ_MAX_SNOOZE_SECONDS``, default one day); a longer one is
    refused and the message is failed instead, retried per the topic's policy.
    """

    def __init__(self, seconds: float, reason: str = "") -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds >= 0:
            raise ValueError("Snooze needs a number of seconds, 0 or more")
        super().__init__(reason or f"snoozed for {seconds:g}s")
        self.seconds = float(seconds)
        self.reason = reason
