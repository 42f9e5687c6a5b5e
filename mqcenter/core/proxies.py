"""Which client a request comes from and over which scheme: the one place that decides whether
`X-Forwarded-For` and `X-Forwarded-Proto` are believed.

They are believed only from a peer listed in MQ_TRUSTED_PROXIES (addresses or networks), under
any server. `manage.py runbroker` has uvicorn leave both headers alone and this middleware
decides. A server that applies them itself before Django runs (plain `uvicorn` trusts them from
127.0.0.1 by default, gunicorn `X-Forwarded-Proto` likewise) may hand Django an address or a
scheme a client chose; when an untrusted peer's request carries the headers and the address or
scheme Django got equals what they claim, the claim is not believed: the request counts as
plain HTTP from an unknown client (all such requests share one login-throttle count).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# The client address of a request whose real peer is unknown (see above).
UNKNOWN_CLIENT = "unknown"

_networks: dict[tuple[str, ...], list[IPNetwork]] = {}


def trusted_proxy_networks() -> list[IPNetwork]:
    entries = tuple(settings.MQ_TRUSTED_PROXIES)
    found = _networks.get(entries)
    if found is None:
        found = _networks[entries] = [ipaddress.ip_network(e.strip(), strict=False) for e in entries if e.strip()]
    return found


def is_trusted_proxy(address: str) -> bool:
    if not settings.MQ_TRUSTED_PROXIES:
        return False
    try:
        ip = ipaddress.ip_address(address.strip().strip("[]"))
    except ValueError:
        return False
    return any(ip in network for network in trusted_proxy_networks())


def forwarded_client(peer: str, forwarded_for: str | None) -> str:
    """The client behind trusted proxies: the rightmost X-Forwarded-For entry that is not a
    trusted proxy itself (entries left of it were written by whoever sent the request and
    prove nothing); the peer when there is none."""
    hops = [hop.strip() for hop in (forwarded_for or "").split(",") if hop.strip()]
    for hop in reversed(hops):
        if not is_trusted_proxy(hop):
            return hop
    return hops[0] if hops else peer


class ForwardedHeadersMiddleware:
    """First in MIDDLEWARE: sets REMOTE_ADDR, `request.client_address` and the request's
    scheme by the rule above, and removes both headers so that nothing after it reads them."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        meta = request.META
        peer = str(meta.get("REMOTE_ADDR") or "")
        forwarded_for = meta.pop("HTTP_X_FORWARDED_FOR", None)
        forwarded_proto = meta.pop("HTTP_X_FORWARDED_PROTO", None)
        client = peer
        if is_trusted_proxy(peer):
            client = forwarded_client(peer, forwarded_for)
            proto = (forwarded_proto or "").split(",")[-1].strip().lower()
            if proto in ("http", "https"):
                meta["wsgi.url_scheme"] = proto
        else:
            claimed = [hop.strip() for hop in (forwarded_for or "").split(",")]
            if forwarded_for is not None and peer in claimed:
                client = UNKNOWN_CLIENT  # the server may have taken the address from the header
            if forwarded_proto is not None and meta.get("wsgi.url_scheme") == "https":
                meta["wsgi.url_scheme"] = "http"  # it may have taken the scheme from it too
        meta["REMOTE_ADDR"] = client if client != UNKNOWN_CLIENT else peer
        request.client_address = client  # type: ignore[attr-defined]
        return self.get_response(request)


def client_address(request: HttpRequest) -> str:
    """The address a request is counted under (login throttling), by the rule above."""
    return str(getattr(request, "client_address", "") or request.META.get("REMOTE_ADDR", ""))
