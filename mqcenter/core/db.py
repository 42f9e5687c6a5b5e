"""Database helpers: retrying transactions that lost a lock race."""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from django.db import (
    OperationalError,
    connection,
)

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

