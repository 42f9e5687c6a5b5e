"""API authentication and scopes.

A token is `mq_<prefix>_<secret>`. The prefix finds the row; only the SHA-256 of the whole
token is stored, so a leaked table reveals no usable token. Tokens belong to one business
line (or to none: a global token) and carry scopes `produce:<glob>`, `consume:<glob>`, `admin`.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from django.conf import settings
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from mqcenter.core.errors import Forbidden, Unauthenticated

TOKEN_PREFIX_LENGTH = 10
# Authenticated tokens are remembered briefly per process so the hot path does not pay a
# query per request; a revoked token stops working within this many seconds.
TOKEN_CACHE_SECONDS = 5.0

SCOPE_ACTIONS = ("produce", "consume")


@dataclass(frozen=True)
class Principal:
    """Who is calling: a token (API) or a console user, reduced to what permissions need."""

    name: str
    scopes: tuple[str, ...]
    biz_ids: frozenset[int] | None  # the business lines it may reach; None: all of them
    token_id: int | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def is_admin(self) -> bool:
        return "admin" in self.scopes

    @property
    def is_authenticated(self) -> bool:  # DRF's IsAuthenticated reads this
        return True

    def may(self, action: str, topic: str) -> bool:
        """Does a scope allow `action` ("produce"/"consume") on `topic`? Admin may all."""
        if self.is_admin:
            return True
        prefix = f"{action}:"
        return any(
            scope.startswith(prefix) and fnmatchcase(topic, scope[len(prefix) :])
            for scope in self.scopes
        )

    def may_biz(self, biz_id: int | None) -> bool:
        """Global principals reach every business line; others only their own."""
        return self.biz_ids is None or biz_id in self.biz_ids

    @property
    def home_biz_id(self) -> int | None:
        """The business line that owns what this principal creates (topics on produce)."""
        return next(iter(self.biz_ids)) if self.biz_ids and len(self.biz_ids) == 1 else None

    def require(self, action: str, topic: str) -> None:
        if not self.may(action, topic):
            raise Forbidden(
                f"This token has no {action} scope for topic {topic!r}.",
                details={"topic": topic, "scope": f"{action}:{topic}"},
            )

    def require_admin(self) -> None:
        if not self.is_admin:
            raise Forbidden("This needs a token with the admin scope.")


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_generate() -> tuple[str, str, str]:
    """A new token: (token, prefix, hash). The token itself is never stored."""
    prefix = secrets.token_hex(TOKEN_PREFIX_LENGTH // 2)
    token = f"mq_{prefix}_{secrets.token_urlsafe(32)}"
    return token, prefix, token_hash(token)


def validate_scope(scope: str) -> str:
    if scope == "admin":
        return scope
    action, sep, pattern = scope.partition(":")
    if not sep or action not in SCOPE_ACTIONS or not pattern:
        raise ValueError(f"invalid scope {scope!r}: use produce:<glob>, consume:<glob> or admin")
    return scope


class _TokenCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[float, Principal]] = {}

    def get(self, token: str) -> Principal | None:
        with self._lock:
            hit = self._entries.get(token)
        if hit and hit[0] > time.monotonic():
            return hit[1]
        return None

    def put(self, token: str, principal: Principal) -> None:
        with self._lock:
            if len(self._entries) > 10_000:
                self._entries.clear()
            self._entries[token] = (time.monotonic() + TOKEN_CACHE_SECONDS, principal)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


token_cache = _TokenCache()


def principal_for_token(token: str) -> Principal:
    """Resolve a bearer token, or raise Unauthenticated."""
    cached = token_cache.get(token)
    if cached is not None:
        return cached
    parts = token.split("_")
    if len(parts) < 3 or parts[0] != "mq" or len(token) > 200:
        raise Unauthenticated("Unknown API token.")
    # One lookup at a time per token prefix: a thousand consumers starting together find the
    # token in the cache after the first, instead of opening a thousand connections.
    with _lookup_locks[hash(parts[1]) % len(_lookup_locks)]:
        cached = token_cache.get(token)
        return cached if cached is not None else _principal_from_database(token, parts[1])


_lookup_locks = [threading.Lock() for _ in range(64)]


def principal_for_token_now(token: str) -> Principal:
    """Resolve a bearer token from the database, not the cache (a long-lived socket's
    periodic re-check must see a revocation at once), or raise Unauthenticated."""
    parts = token.split("_")
    if len(parts) < 3 or parts[0] != "mq" or len(token) > 200:
        raise Unauthenticated("Unknown API token.")
    return _principal_from_database(token, parts[1])


def _principal_from_database(token: str, prefix: str) -> Principal:
    from topics.models import ApiToken  # app models load after settings

    row = ApiToken.objects.filter(prefix=prefix, revoked_at__isnull=True).first()
    if row is None or not hmac.compare_digest(row.token_hash, token_hash(token)):
        raise Unauthenticated("Unknown API token.")
    principal = Principal(
        name=row.name or f"token:{row.prefix}",
        scopes=tuple(row.scopes),
        biz_ids=None if row.biz_id is None else frozenset([row.biz_id]),
        token_id=row.id,
    )
    token_cache.put(token, principal)
    return principal


def bearer_token(header: bytes) -> str:
    """The token of an `Authorization: Bearer <token>` header's value, or raise Unauthenticated."""
    parts = header.split()
    if not parts:
        raise Unauthenticated("Send an Authorization: Bearer <token> header.")
    if parts[0].lower() != b"bearer" or len(parts) != 2:
        raise Unauthenticated("Use the form Authorization: Bearer <token>.")
    try:
        return parts[1].decode("ascii")
    except UnicodeDecodeError as exc:
        raise Unauthenticated("Unknown API token.") from exc


class TokenAuthentication(BaseAuthentication):
    """`Authorization: Bearer <token>` on every API call."""

    def authenticate(self, request: Request) -> tuple[Principal, str] | None:
        token = bearer_token(get_authorization_header(request))
        return principal_for_token(token), token

    def authenticate_header(self, request: Request) -> str:
        return "Bearer"


class HasToken(BasePermission):
    def has_permission(self, request: Request, view: Any) -> bool:
        if not isinstance(request.user, Principal):
            raise Unauthenticated("Send an Authorization: Bearer <token> header.")
        return True


class IsAdminToken(HasToken):
    def has_permission(self, request: Request, view: Any) -> bool:
        super().has_permission(request, view)
        request.user.require_admin()
        return True


class TokenRateThrottle(BaseThrottle):
    """Per-token request rate (MQ_TOKEN_RATE, e.g. "6000/min"); 429 with Retry-After.

    A fixed-window counter shared by every broker process through the cache (Redis in
    production); see `token_throttle_wait`. DRF's SimpleRateThrottle keeps every request's
    timestamp in one cache value, re-read and re-written whole on each call: at a few
    hundred calls a second that list was the broker's biggest single cost.
    """

    def __init__(self) -> None:
        self.retry_after: float | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        principal = request.user
        if not isinstance(principal, Principal) or not isinstance(request.auth, str):
            return True
        self.retry_after = token_throttle_wait(request.auth)
        return self.retry_after is None

    def wait(self) -> float | None:
        return self.retry_after


#: How long a broker process keeps a token's requests to itself at most before adding them to
#: the shared counter.
THROTTLE_SYNC_SECONDS = 0.1


@dataclass
class _WindowCount:
    """One token's window as this process sees it: the shared count when it last added its
    own, and the requests it counted since."""

    window: int
    shared: int = 0
    unsent: int = 0
    sent_at: float = 0.0


_window_counts: dict[str, _WindowCount] = {}
_window_counts_lock = threading.Lock()


def token_throttle_wait(token: str) -> float | None:
    """Count one request of this token; None if it is within MQ_TOKEN_RATE, else how many
    seconds until its window ends.

    The count is shared by every broker process, but not added to on every request: a round
    trip to Redis would be ~0.5 ms of a ~5.5 ms delivery and ~10 % of a small produce's CPU
    (`python -m bench latency`, `python -m bench produce`). Each process adds its requests at least every THROTTLE_SYNC_SECONDS and
    every 1 % of the limit, and on every request once the count it knows is within 1 % of
    the limit, so the limit holds exactly for small limits and to within 1 % per process
    for large ones.
    """
    rate = settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"].get("token")
    if not rate:
        return None
    limit, period = parse_rate(rate)
    slack = limit // 100
    now = time.time()
    window = int(now // period)
    # Keyed by the token itself (hashed), not its row id, which a rebuilt database reuses.
    key = f"throttle_token_{token_hash(token)[:24]}_{window}"
    with _window_counts_lock:
        mine = _window_counts.get(key)
        if mine is None:
            stale = [k for k, counted in _window_counts.items() if counted.window != window]
            for old in stale:
                del _window_counts[old]
            mine = _window_counts[key] = _WindowCount(window)
        mine.unsent += 1
        count = mine.shared + mine.unsent
        send = mine.unsent if (
            mine.unsent > slack or count > limit - slack or now - mine.sent_at >= THROTTLE_SYNC_SECONDS
        ) else 0
        mine.unsent -= send
    if send:
        try:
            shared = request_counter_add(key, period, send)
        except Exception:  # noqa: BLE001 - Redis is not on the durability path: serve
            with _window_counts_lock:
                mine.unsent += send  # for the next attempt
            return None
        with _window_counts_lock:
            mine.shared, mine.sent_at = max(mine.shared, shared), now
            count = mine.shared + mine.unsent
    if count <= limit:
        return None
    return (window + 1) * period - now


def parse_rate(rate: str) -> tuple[int, int]:
    """"6000/min" -> (6000, 60)."""
    count, _, unit = rate.partition("/")
    return int(count), {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit[0]]


_redis_clients: dict[str, Any] = {}


def request_counter_add(key: str, period: int, count: int) -> int:
    """Add `count` to a counter that lives `period` seconds; answers the new total.

    On the Redis cache, one pipelined INCRBY + EXPIRE through a client shared by all threads
    (Django's cache object, and so its connection pool, is per thread). Elsewhere (the
    quick start's in-process cache, tests) through the cache API.
    """
    from django.core.cache import cache

    options = settings.CACHES["default"]
    if options["BACKEND"] != "django.core.cache.backends.redis.RedisCache":
        cache.add(key, 0, period + 1)
        return int(cache.incr(key, count))
    client = _redis_clients.get(options["LOCATION"])
    if client is None:
        import redis

        client = redis.Redis.from_url(options["LOCATION"], socket_timeout=1, socket_connect_timeout=1)
        _redis_clients[options["LOCATION"]] = client
    pipe = client.pipeline(transaction=False)
    pipe.incrby(f"mq:{key}", count)
    pipe.expire(f"mq:{key}", period + 1)
    total, _ = pipe.execute()
    return int(total)
