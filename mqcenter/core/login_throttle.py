"""Console login throttling.

Too many failed logins for one username, or from one address, block further attempts for a
while (each attempt is counted before its password is checked; a success takes it back): password guessing slows to a crawl, while a user who mistyped is back within the
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


def login_attempt_admit(*, username: str, address: str) -> bool:
    """Count a login attempt for this username and address, then answer whether it may be
    checked: False once either has too many recent attempts that no success followed. The
    count comes first (one atomic increment each), so concurrent guesses cannot all pass a
    check made before any of them was counted."""
    try:
        counts = []
        for key in (_username_key(username), _address_key(address)):
            cache.add(key, 0, WINDOW_SECONDS)  # the window starts at the first attempt
            counts.append(cache.incr(key))
    except Exception:  # noqa: BLE001 - the cache is not on the security-critical path
        logger.warning("login throttle unavailable: cache error")
        return True
    return counts[0] <= MAX_FAILURES_PER_USERNAME and counts[1] <= MAX_FAILURES_PER_ADDRESS


def login_success_record(*, username: str, address: str) -> None:
    """A successful login forgets the username's attempts and takes its own back from the
    address's count."""
    try:
        cache.delete(_username_key(username))
        cache.decr(_address_key(address))
    except Exception:  # noqa: BLE001
        logger.warning("login throttle unavailable: cache error")
