"""The broker calling out (transaction check-backs, alarm webhooks): only http(s), only to
hosts the operator listed, with a timeout and without following redirects."""

from __future__ import annotations

import json
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from mqcenter.core.errors import InvalidRequest

RESPONSE_LIMIT = 64 * 1024  # bytes of an answer read (and kept for error messages)


def host_allowed(host: str, port: int | None, allowed: list[str]) -> bool:
    """Whether `host`:`port` is in `allowed`. An entry "host" allows every port of that host;
    "host:port" only that port."""
    host = host.lower()
    for entry in allowed:
        allowed_host, _, allowed_port = (
            entry.lower().rpartition(":") if entry.count(":") == 1 else (entry.lower(), "", "")
        )
        if allowed_host == host and (
            not allowed_port or (port is not None and str(port) == allowed_port)
        ):
            return True
    return False


def outbound_url_check(*, url: Any, allowed: list[str], setting: str, field: str, what: str) -> str:
    """`url` if the broker may call it (http or https, its host in `allowed`, the operator's
    list named `setting`); otherwise InvalidRequest naming `field`. `what` names the URL in
    messages ("check_url", "webhook URL")."""
    if not isinstance(url, str) or not url or len(url) > 2000:
        raise InvalidRequest(
            f"{what} must be a URL of at most 2000 characters.", details={"field": field}
        )
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError as exc:
        raise InvalidRequest(f"{what} has an invalid port.", details={"field": field}) from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidRequest(f"{what} must be an http or https URL.", details={"field": field})
    if not allowed:
        raise InvalidRequest(
            f"The operator has listed no hosts the broker may call for a {what} ({setting}).",
            details={"field": field},
        )
    if not host_allowed(parts.hostname, port, allowed):
        raise InvalidRequest(
            f"{what}'s host {parts.hostname!r} is not in {setting}.", details={"field": field}
        )
    return url


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    # A redirect could lead anywhere: the allow-list names where the broker may go.
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


OPENER = urllib.request.build_opener(_NoRedirects)


def post_json(url: str, body: Any, *, timeout: float, user_agent: str) -> tuple[int, bytes]:
    """POST `body` as JSON; the answer's status and first RESPONSE_LIMIT bytes. Raises on a connection
    failure, a timeout or a non-2xx answer (a 3xx is not followed). The caller has checked
    `url` with outbound_url_check."""
    request = urllib.request.Request(  # noqa: S310 - http(s) only, checked by the caller
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "User-Agent": user_agent},
    )
    with OPENER.open(request, timeout=timeout) as response:
        return response.status, bytes(response.read(RESPONSE_LIMIT))
