"""Database helpers: retrying transactions that lost a lock race, and keeping the number of
persistent connections bounded."""

from __future__ import annotations

import functools
import random
import threading
import time
import weakref
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from django.conf import settings
from django.db import (
    DEFAULT_DB_ALIAS,
    OperationalError,
    connection,
    connections,
)
from django.db.backends.base.base import BaseDatabaseWrapper

P = ParamSpec("P")
R = TypeVar("R")

# MySQL/MariaDB: 1213 deadlock, 1205 lock wait timeout. PostgreSQL: serialization failure,
# deadlock detected. Both mean "this transaction was rolled back; running it again is safe".
MYSQL_RETRYABLE = {1213, 1205}
POSTGRES_RETRYABLE = {"40001", "40P01"}
ATTEMPTS = 4


def is_lock_conflict(exc: BaseException) -> bool:
    if not isinstance(exc, OperationalError):
        return False
    cause = exc.__cause__ or exc
    code = getattr(cause, "args", [None])[0] if cause.args else None
    return code in MYSQL_RETRYABLE or getattr(cause, "sqlstate", None) in POSTGRES_RETRYABLE


def retry_on_lock_conflict(fn: Callable[P, R]) -> Callable[P, R]:
    """Run a service transaction again when the database chose it as a deadlock victim.

    Only the outermost transaction can be retried: inside a caller's atomic block the error
    is passed on, because the caller's earlier work was rolled back too.
    """

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        for attempt in range(ATTEMPTS):
            try:
                return fn(*args, **kwargs)
            except OperationalError as exc:
                if attempt == ATTEMPTS - 1 or connection.in_atomic_block or not is_lock_conflict(exc):
                    raise
                time.sleep(random.uniform(0.001, 0.01) * (attempt + 1))
        raise AssertionError("unreachable")

    return wrapper


# --- persistent connections, capped ------------------------------------------------------

_opened: weakref.WeakSet[BaseDatabaseWrapper] = weakref.WeakSet()
_opened_lock = threading.Lock()


def remember_connection(sender: object, connection: BaseDatabaseWrapper, **kwargs: object) -> None:
    """connection_created receiver: every thread's database connection, to count them."""
    with _opened_lock:
        _opened.add(connection)


def cap_persistent_connections(**kwargs: object) -> None:
    """request_finished receiver (after Django's own): keep this thread's connection for the
    next request only while the process holds few open connections.

    Connecting costs ~1.5 ms a request here (measured), so connections persist
    (CONN_MAX_AGE). But HTTP runs on a pool of ~1,100 threads, most of them there for the
    long-polls; with every one keeping a connection the broker would exhaust MariaDB's
    max_connections. Beyond MQ_DB_KEEP_CONNECTIONS, a finished request hands its back.
    """
    current = connections[DEFAULT_DB_ALIAS]
    if current.connection is None:
        return
    with _opened_lock:
        open_now = sum(1 for wrapper in _opened if wrapper.connection is not None)
    if open_now > settings.MQ_DB_KEEP_CONNECTIONS:
        current.close()

