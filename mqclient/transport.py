"""HTTP transport: pooled keep-alive connections (mqclient/wire.py), broker failover,
bounded retries.

Everything the SDK sends goes through :meth:`Transport.call`. It owns the three decisions that
make the SDK durable without being clever at every call site:

* **Which broker.** Sticky: keep using the broker that last answered (its keep-alive
  connections are warm); a broker that failed is benched for a growing interval and the next
  one is tried at once. Each process starts at a random position so a fleet spreads out.
* **What is transient.** Connection errors, timeouts, 429 and 5xx are retried with
  exponential backoff and full jitter, honouring ``Retry-After``, until ``deadline`` runs out.
  Every call the SDK makes is safe to repeat (produce carries a ``dedup_key``; ack, extend and
  release are idempotent by contract; a repeated pull at worst claims messages whose lease will
  expire), so retrying on an ambiguous timeout is correct.
* **What is permanent.** Any other 4xx raises the typed :class:`~mqclient.errors.APIError`
  at once, carrying the API.md ``code``, ``message`` and ``details``.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from mqclient.errors import APIError, BrokerUnavailable, ConfigurationError, api_error_class
from mqclient.version import __version__
from mqclient.wire import ConnectionPool, HTTPFailure, Response

logger = logging.getLogger("mqclient.transport")

#: Statuses worth another try (possibly on another broker).
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})


@dataclass
class _BrokerState:
    url: str
    failures: int = 0
    benched_until: float = 0.0


class Transport:
    """A thread-safe client for the broker API over a list of broker URLs.

    ``request_timeout`` is the HTTP timeout of an ordinary call; long-polls pass a longer
    ``timeout``. ``retry_deadline`` bounds how long one call keeps retrying transient failures.
    """

    def __init__(
        self,
        brokers: Iterable[str],
        token: str | None = None,
        *,
        request_timeout: float = 10.0,
        retry_deadline: float = 60.0,
        connect_timeout: float = 3.0,
        backoff_base: float = 0.1,
        backoff_cap: float = 5.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        urls = [url.rstrip("/") for url in brokers if url.strip()]
        if not urls:
            raise ConfigurationError("no broker URL given")
        self._lock = threading.Lock()
        self._seeds = list(urls)
        self._brokers = [_BrokerState(url) for url in urls]
        self._current = random.randrange(len(self._brokers))
        self.request_timeout = request_timeout
        self.retry_deadline = retry_deadline
        self.connect_timeout = connect_timeout
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self._sleep = sleep
        headers = {"User-Agent": f"mqclient/{__version__}", "Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._connections = ConnectionPool(headers)

    # ------------------------------------------------------------------ broker list

    @property
    def brokers(self) -> list[str]:
        """The broker URLs currently known, in failover order."""
        with self._lock:
            return [state.url for state in self._brokers]

    def update_brokers(self, urls: Iterable[str]) -> None:
        """Adopt the registry's broker list, keeping the seeds as a last resort.

        The registry may list addresses this client cannot reach (internal IPs behind a load
        balancer); those are benched after one failed connect, and the seed URLs stay in the
        list so the client can always get back to where it started.
        """
        fresh = [url.rstrip("/") for url in urls if isinstance(url, str) and url.strip()]
        if not fresh:
            return
        with self._lock:
            known = {state.url: state for state in self._brokers}
            current_url = self._brokers[self._current].url
            ordered = fresh + [url for url in self._seeds if url not in fresh]
            self._brokers = [known.get(url) or _BrokerState(url) for url in ordered]
            urls_now = [state.url for state in self._brokers]
            self._current = urls_now.index(current_url) if current_url in urls_now else 0
        if set(urls_now) != set(known):
            # Which brokers a client can fail over to is the first question when it cannot.
            logger.info("brokers known: %s", ", ".join(urls_now), extra={"brokers": urls_now})

    def _pick(self) -> _BrokerState:
        """The sticky broker if it is not benched, else the next one that is not, else the
        one whose bench ends first."""
        now = time.monotonic()
        with self._lock:
            count = len(self._brokers)
            for step in range(count):
                index = (self._current + step) % count
                state = self._brokers[index]
                if state.benched_until <= now:
                    self._current = index
                    return state
            index = min(range(count), key=lambda i: self._brokers[i].benched_until)
            self._current = index
            return self._brokers[index]

    def _mark_failed(self, state: _BrokerState) -> None:
        with self._lock:
            state.failures += 1
            state.benched_until = time.monotonic() + min(30.0, 0.5 * 2 ** min(state.failures, 6))
            if self._brokers and self._brokers[self._current] is state:
                self._current = (self._current + 1) % len(self._brokers)

    def _mark_ok(self, state: _BrokerState) -> None:
        if state.failures or state.benched_until:
            with self._lock:
                state.failures = 0
                state.benched_until = 0.0

    # ------------------------------------------------------------------ calls

    def call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        timeout: float | None = None,
        deadline: float | None = None,
        retry: bool = True,
        should_stop: Callable[[], bool] | None = None,
    ) -> Any:
        """Send one API call and return the decoded JSON body (``None`` for an empty body).

        Transient failures are retried across brokers until ``deadline`` seconds have passed
        (default ``retry_deadline``); ``retry=False`` makes one attempt per known broker at most.
        ``should_stop`` lets a shutting-down runner cut the retries short.
        Raises :class:`APIError` for a permanent answer, :class:`BrokerUnavailable` when the
        budget ran out without one.
        """
        budget = self.retry_deadline if deadline is None else deadline
        started = time.monotonic()
        read_timeout = self.request_timeout if timeout is None else timeout
        connect_timeout = min(self.connect_timeout, read_timeout)
        attempt = 0
        last_error: BaseException | None = None
        while True:
            attempt += 1
            state = self._pick()
            retry_after: float | None = None
            try:
                response = self._connections.request(
                    method, state.url + path, json=json, params=params,
                    connect_timeout=connect_timeout, read_timeout=read_timeout,
                )
            except HTTPFailure as exc:
                last_error = exc
                self._mark_failed(state)
                logger.warning(
                    "broker %s failed on %s %s: %s", state.url, method, path, _describe(exc)
                )
            else:
                if response.status_code < 400:
                    self._mark_ok(state)
                    return response.json() if response.content else None
                error = _api_error(response)
                if response.status_code not in TRANSIENT_STATUSES:
                    self._mark_ok(state)
                    raise error
                last_error = error
                retry_after = error.retry_after
                if response.status_code != 429:
                    self._mark_failed(state)
                logger.warning("broker %s answered %s on %s %s", state.url, error, method, path)
            pause = self._backoff(attempt, retry_after)
            elapsed = time.monotonic() - started
            out_of_budget = not retry and attempt >= len(self._brokers)
            if out_of_budget or elapsed + pause > budget or (should_stop and should_stop()):
                if isinstance(last_error, APIError):
                    raise last_error
                raise BrokerUnavailable(
                    f"{method} {path}: no broker answered after {attempt} attempt(s) "
                    f"in {elapsed:.1f}s ({_describe(last_error)})",
                    last_error=last_error,
                )
            if pause > 0:
                self._sleep(pause)

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        """No pause while untried brokers remain in this round; then exponential full jitter."""
        if retry_after is not None:
            return min(retry_after, self.backoff_cap * 4)
        count = len(self._brokers)
        if attempt % count != 0:
            return 0.0
        rounds = attempt // count
        return random.uniform(0, min(self.backoff_cap, self.backoff_base * 2**rounds))

    def close(self) -> None:
        """Close the pooled connections."""
        self._connections.close()

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _describe(exc: BaseException | None) -> str:
    if exc is None:
        return "no attempt"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _retry_after(response: Response) -> float | None:
    raw = response.headers.get("Retry-After")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        return None  # an HTTP date: rare for these APIs; fall back to our own backoff


def _api_error(response: Response) -> APIError:
    """Turn an error answer into the typed exception, tolerating a non-API.md body (e.g. a
    proxy's HTML 502 page)."""
    code = f"http_{response.status_code}"
    message = response.reason_phrase or "error"
    details: dict[str, Any] = {}
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        err = body["error"]
        code = str(err.get("code") or code)
        message = str(err.get("message") or message)
        if isinstance(err.get("details"), dict):
            details = err["details"]
    elif response.text:
        message = response.text[:200]
    cls = api_error_class(response.status_code, code)
    return cls(
        status=response.status_code,
        code=code,
        message=message,
        details=details,
        retry_after=_retry_after(response),
    )
