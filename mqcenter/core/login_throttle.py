"""Console login throttling.

Too many failed logins for one username, or from one address, block further attempts for a
while: password guessing slows to a crawl, while a user who mistyped is back within the
window. Counters live in the cache (Redis in production); if the cache is down, logins are
not blocked (the password check still applies).
"""

from __future__ import annotations

import hashlib
import logging

from django.core.cache import cache

logger = logging.getLogger(__name__)

MAX_FAILURES_PER_USERNAME = 5
MAX_FAILURES_PER_ADDRESS = 20
WINDOW_SECONDS = 15 * 60


def _username_key(username: str) -> str:
    return "login-fail:user:" + hashlib.sha256(username.strip().lower().encode()).hexdigest()[:32]


def _address_key(address: str) -> str:
    return "login-fail:addr:" + hashlib.sha256(address.encode()).hexdigest()[:32]


def login_attempt_blocked(*, username: str, address: str) -> bool:
    """True when this username or address failed too often within the window."""
    try:
        failures = cache.get_many([_username_key(username), _address_key(address)])
    except Exception:  # noqa: BLE001 - the cache is not on the security-critical path
        logger.warning("login throttle unavailable: cache error")
        return False
    return (
        failures.get(_username_key(username), 0) >= MAX_FAILURES_PER_USERNAME
        or failures.get(_address_key(address), 0) >= MAX_FAILURES_PER_ADDRESS
    )


def login_failure_record(*, username: str, address: str) -> None:
    """Count a failed login; the window starts at the first failure."""
    try:
        for key in (_username_key(username), _address_key(address)):
            cache.add(key, 0, WINDOW_SECONDS)
            cache.incr(key)
    except Exception:  # noqa: BLE001
        logger.warning("login throttle unavailable: cache error")


def login_failures_clear(*, username: str) -> None:
    """A successful login forgets the username's failures (not the address's)."""
    try:
        cache.delete(_username_key(username))
    except Exception:  # noqa: BLE001
        logger.warning("login throttle unavailable: cache error")
