"""The broker calling out: transaction check-backs, alarm webhooks and their test sends.

Every outbound HTTP call of the broker goes through this module, so each one keeps the same
promises whoever asks for it:

- only `http`/`https` URLs without control characters, to a host the operator allowed
  (`AllowList`: global entries and entries of one business line), on the port allowed (an
  entry without a port allows the scheme's default port only);
- the allow-list is checked again after DNS resolution and the call connects to the very
  address that was checked (a name that resolves elsewhere later cannot move the call);
- one *total* deadline per call: resolution, connection, the request, every read of the
  answer and its body, all within `deadline` seconds (a server dripping a byte at a time
  cannot hold a call longer); at most ANSWER_LIMIT bytes of answer; no redirects;
- every failure, whatever raised it, is an `Answer` with `ok=False` for that one call:
  nothing raises out of `post_json` or `post_many`, so one broken target never loses the
  answers of the others;
- `post_many` runs calls concurrently, at most `per_group` at once per group (a business
  line) and `overall` in all: one line's slow targets wait for that line's own slots.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import ssl
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx

from mqcenter.core.errors import InvalidRequest

ANSWER_LIMIT = 64 * 1024  # bytes of an answer read (and kept for error messages)
URL_LIMIT = 2000
DEFAULT_PORTS = {"http": 80, "https": 443}

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


# --- where the broker may call ---------------------------------------------------------------


@dataclass(frozen=True)
class AllowEntry:
    """One allow-list entry: a host name or an address network, a port (None: the scheme's
    default port; 0: any port) and the business line it serves (None: every line)."""

    name: str | None
    network: IPNetwork | None
    port: int | None
    biz: str | None

    def port_ok(self, scheme: str, port: int) -> bool:
        if self.port == 0:
            return True
        return port == (self.port if self.port is not None else DEFAULT_PORTS[scheme])


def allow_entry_parse(raw: str) -> AllowEntry:
    """`[biz=]host[:port]`: host a name, an IPv4 address, `[IPv6]`, or a network in CIDR
    (`10.1.0.0/16`, `[fd00::/8]`); port a number or `*` (any port). ValueError if malformed."""
    text = raw.strip().lower()
    biz, sep, rest = text.partition("=")
    if not sep:
        biz, rest = "", text
    if sep and not biz:
        raise ValueError(f"allow-list entry {raw!r}: empty business line")
    port_text = ""
    if rest.startswith("["):
        host, bracket, tail = rest[1:].partition("]")
        if not bracket or (tail and not tail.startswith(":")):
            raise ValueError(f"allow-list entry {raw!r}: use [IPv6]:port")
        port_text = tail[1:]
    elif rest.count(":") == 1:
        host, _, port_text = rest.partition(":")
    else:
        host = rest
    if port_text and port_text != "*" and not port_text.isdigit():
        raise ValueError(f"allow-list entry {raw!r}: bad port {port_text!r}")
    port = None if not port_text else (0 if port_text == "*" else int(port_text))
    if port is not None and not 0 <= port <= 65535:
        raise ValueError(f"allow-list entry {raw!r}: bad port")
    if not host:
        raise ValueError(f"allow-list entry {raw!r}: no host")
    try:
        network: IPNetwork | None = ipaddress.ip_network(host, strict=False)
    except ValueError:
        network = None
    return AllowEntry(name=None if network else host.rstrip("."), network=network, port=port, biz=biz or None)


class AllowList:
    """The hosts the broker may call for one purpose, from a setting's entries."""

    def __init__(self, entries: Sequence[str], *, setting: str) -> None:
        self.setting = setting
        self.entries = [allow_entry_parse(e) for e in entries if e.strip()]

    def serves(self, biz: str | None) -> list[AllowEntry]:
        """The entries that apply to a call for business line `biz`."""
        return [e for e in self.entries if e.biz is None or e.biz == biz]

    def host_ok(self, *, scheme: str, host: str, port: int, biz: str | None) -> bool:
        """Whether the URL's host (a name or an address) and port are allowed before
        resolution: a name entry names it, or it is an address inside a network entry."""
        address = _address(host)
        for entry in self.serves(biz):
            if not entry.port_ok(scheme, port):
                continue
            if address is None and entry.name == host:
                return True
            if address is not None and entry.network is not None and address in entry.network:
                return True
            if address is None and entry.network is not None:
                return True  # decided on the resolved addresses (address_ok)
        return False

    def address_ok(self, *, scheme: str, host: str, port: int, biz: str | None, address: IPAddress) -> bool:
        """Whether the call may connect to `address`, which `host` resolved to: inside a
        network entry for that port, or reached through a name entry and not an address no
        public name should lead to (loopback unless the name is `localhost`, link-local
        such as the cloud metadata address, unspecified, multicast, reserved)."""
        for entry in self.serves(biz):
            if not entry.port_ok(scheme, port):
                continue
            if entry.network is not None and address in entry.network:
                return True
            if entry.name is not None and entry.name == host and _name_may_reach(host, address):
                return True
        return False


def _address(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _name_may_reach(host: str, address: IPAddress) -> bool:
    if address.is_loopback:
        return host == "localhost"
    return not (address.is_link_local or address.is_unspecified or address.is_multicast or address.is_reserved)


_allow_lists: dict[tuple[str, tuple[str, ...]], AllowList] = {}


def allow_list(setting: str) -> AllowList:
    """The AllowList of the Django setting named `setting` (parsed once per value)."""
    from django.conf import settings

    entries = tuple(getattr(settings, setting))
    key = (setting, entries)
    found = _allow_lists.get(key)
    if found is None:
        if len(_allow_lists) > 32:
            _allow_lists.clear()
        found = _allow_lists[key] = AllowList(entries, setting=setting)
    return found


@dataclass(frozen=True)
class Target:
    """A URL the broker may call: its parts, checked."""

    url: str
    scheme: str
    host: str
    port: int
    path: str  # path and query, as sent


def url_check(*, url: Any, allowed: AllowList, biz: str | None, field: str, what: str) -> Target:
    """The checked Target of `url`, or InvalidRequest naming `field`: at most URL_LIMIT
    printable ASCII characters (no control characters or spaces), http or https, a host and
    port `allowed` lets business line `biz` call. `what` names the URL in messages."""
    if not isinstance(url, str) or not url or len(url) > URL_LIMIT:
        raise InvalidRequest(f"{what} must be a URL of at most {URL_LIMIT} characters.", details={"field": field})
    if any(not 0x21 <= ord(c) <= 0x7E for c in url):
        raise InvalidRequest(
            f"{what} may hold only printable ASCII characters (no spaces or control characters; "
            "percent-encode the rest).",
            details={"field": field},
        )
    try:
        parts = urlsplit(url)
        port = parts.port
        host = parts.hostname
    except ValueError as exc:
        raise InvalidRequest(f"{what} is not a valid URL: {exc}.", details={"field": field}) from exc
    if parts.scheme not in DEFAULT_PORTS or not host:
        raise InvalidRequest(f"{what} must be an http or https URL.", details={"field": field})
    if not allowed.serves(biz):
        raise InvalidRequest(
            f"The operator has listed no hosts the broker may call for a {what} ({allowed.setting}).",
            details={"field": field},
        )
    port = port if port is not None else DEFAULT_PORTS[parts.scheme]
    host = host.rstrip(".")
    if not allowed.host_ok(scheme=parts.scheme, host=host, port=port, biz=biz):
        if any(allowed.host_ok(scheme=parts.scheme, host=host, port=p, biz=biz) for p in (80, 443)):
            raise InvalidRequest(f"{what}'s port {port} is not allowed for host {host!r} in {allowed.setting} "
                                 "(an entry without a port allows the scheme's default port only).",
                                 details={"field": field})
        raise InvalidRequest(f"{what}'s host {host!r} is not in {allowed.setting}.", details={"field": field})
    path = parts.path or "/"
    return Target(url=url, scheme=parts.scheme, host=host, port=port, path=f"{path}?{parts.query}" if parts.query else path)


# --- calling -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One POST of `body` as JSON to `url` for business line `biz` (its group for the
    concurrency bound); bytes are posted as they are (a body signed over its exact bytes)."""

    url: str
    body: Any
    biz: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Answer:
    """How one call went: ok (a 2xx within the deadline and the size cap) with its status and
    body, or not, with what went wrong in a few words."""

    ok: bool
    status: int | None = None
    body: bytes = b""
    error: str = ""

    def json(self) -> Any:
        """The body as JSON (ValueError if it is not)."""
        return json.loads(self.body or b"null")


class _Failed(Exception):
    """A call failed for a reason already said in words."""


def post(call: Call, *, allowed: AllowList, deadline: float, user_agent: str) -> Answer:
    """One call, within `deadline` seconds in all. Never raises."""
    return post_many([call], allowed=allowed, deadline=deadline, user_agent=user_agent, per_group=1, overall=1)[0]


def post_many(
    calls: Sequence[Call], *, allowed: AllowList, deadline: float, user_agent: str, per_group: int, overall: int
) -> list[Answer]:
    """Every call concurrently, at most `per_group` at once for one business line and
    `overall` in all; their answers in the order of `calls`. Each call has `deadline`
    seconds from its start. Never raises. Call from a thread without a running event loop
    (a Celery task, a test)."""
    if not calls:
        return []
    return anyio.run(_post_all, list(calls), allowed, deadline, user_agent, max(1, per_group), max(1, overall))


async def _post_all(
    calls: list[Call], allowed: AllowList, deadline: float, user_agent: str, per_group: int, overall: int
) -> list[Answer]:
    answers: list[Answer] = [Answer(False, error="not run")] * len(calls)
    everyone = anyio.Semaphore(overall)
    groups: dict[str | None, anyio.Semaphore] = {}
    # No proxies from the environment (they would connect elsewhere than the checked
    # address), no redirects, no keep-alive between targets.
    async with httpx.AsyncClient(
        trust_env=False, follow_redirects=False, timeout=deadline,
        limits=httpx.Limits(max_keepalive_connections=0),
    ) as client:

        async def one(index: int, call: Call) -> None:
            group = groups.setdefault(call.biz, anyio.Semaphore(per_group))
            # The line's own slot first: a line whose calls wait holds none of the shared ones.
            async with group, everyone:
                answers[index] = await _post(client, call, allowed, deadline, user_agent)

        async with anyio.create_task_group() as tasks:
            for index, call in enumerate(calls):
                tasks.start_soon(one, index, call)
    return answers


async def _post(client: httpx.AsyncClient, call: Call, allowed: AllowList, deadline: float, user_agent: str) -> Answer:
    try:
        target = url_check(url=call.url, allowed=allowed, biz=call.biz, field="url", what="URL")
        with anyio.fail_after(deadline):
            return await _send(client, target, call, allowed, user_agent)
    except InvalidRequest as exc:
        return Answer(False, error=exc.message)
    except _Failed as exc:
        return Answer(False, error=str(exc))
    except TimeoutError:
        return Answer(False, error=f"no complete answer within {deadline:g} s")
    except Exception as exc:  # noqa: BLE001 - whatever broke, it is this one call that failed
        return Answer(False, error=describe_error(exc))


async def _send(client: httpx.AsyncClient, target: Target, call: Call, allowed: AllowList, user_agent: str) -> Answer:
    address = await _resolve(target, allowed, call.biz)
    literal = f"[{address}]" if address.version == 6 else str(address)
    default = DEFAULT_PORTS[target.scheme] == target.port
    host_header = target.host if default else f"{target.host}:{target.port}"
    if ":" in target.host:
        host_header = f"[{target.host}]" if default else f"[{target.host}]:{target.port}"
    request = client.build_request(
        "POST",
        f"{target.scheme}://{literal}:{target.port}{target.path}",
        content=call.body if isinstance(call.body, bytes) else json.dumps(call.body).encode(),
        headers={**call.headers, "Host": host_header, "Content-Type": "application/json", "User-Agent": user_agent},
        # TLS is verified against the name in the URL, not the address connected to.
        extensions={"sni_hostname": target.host} if target.scheme == "https" and _address(target.host) is None else {},
    )
    response = await client.send(request, stream=True)
    try:
        body = bytearray()
        async for chunk in response.aiter_raw():
            body += chunk
            if len(body) > ANSWER_LIMIT:
                raise _Failed(f"the answer is larger than {ANSWER_LIMIT} bytes")
    finally:
        await response.aclose()
    if not 200 <= response.status_code < 300:
        reason = response.reason_phrase or ""
        return Answer(False, response.status_code, bytes(body), f"HTTP {response.status_code} {reason}".strip())
    return Answer(True, response.status_code, bytes(body))


async def _resolve(target: Target, allowed: AllowList, biz: str | None) -> IPAddress:
    """The first address `target.host` resolves to that the allow-list lets the call reach."""
    literal = _address(target.host)
    if literal is not None:
        candidates = [literal]
    else:
        try:
            infos = await anyio.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise _Failed(f"cannot resolve {target.host!r}: {exc}") from exc
        candidates = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    for address in candidates:
        if allowed.address_ok(scheme=target.scheme, host=target.host, port=target.port, biz=biz, address=address):
            return address
    shown = ", ".join(sorted({str(a) for a in candidates})) or "nothing"
    raise _Failed(f"{target.host!r} resolves to {shown}, which {allowed.setting} does not allow")


def describe_error(exc: BaseException) -> str:
    """A failed call in a few words, for the history kept and the console."""
    if isinstance(exc, httpx.ConnectError | ConnectionError):
        text = f"could not connect: {exc}"
    elif isinstance(exc, httpx.RemoteProtocolError | httpx.LocalProtocolError | httpx.DecodingError):
        text = f"not a valid HTTP answer: {exc}"
    elif isinstance(exc, httpx.ReadError | httpx.WriteError):
        text = f"the connection broke: {exc or 'reset by the other side'}"
    elif isinstance(exc, ssl.SSLError):
        text = f"TLS failed: {exc}"
    elif isinstance(exc, httpx.HTTPError):
        text = f"{type(exc).__name__}: {exc}"
    else:
        text = f"{type(exc).__name__}: {exc}"
    return text[:500]

