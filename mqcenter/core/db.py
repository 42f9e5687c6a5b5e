"""Database helpers: retrying transactions that lost a lock race, and the reads that may go
to another node or a replica (DATABASE_READ_URL)."""

from __future__ import annotations

import contextvars
import functools
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

from django.conf import settings
from django.db import (
    DEFAULT_DB_ALIAS,
    OperationalError,
    connection,
)

P = ParamSpec("P")
R = TypeVar("R")

# MySQL/MariaDB: 1213 deadlock, 1205 lock wait timeout. PostgreSQL: serialization failure,
# deadlock detected. Both mean "this transaction was rolled back; running it again is safe".
MYSQL_RETRYABLE = {1213, 1205}
POSTGRES_RETRYABLE = {"40001", "40P01"}
# Galera adds a third: a transaction that lost certification to another node's (error 1213
# at COMMIT). Six attempts with a doubling pause (at most ~0.3 s in all) ride out a busy
# moment on a loaded machine.
ATTEMPTS = 6


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
                time.sleep(random.uniform(0.001, 0.01) * 2**attempt)
        raise AssertionError("unreachable")

    return wrapper



# --- reads that may go elsewhere ---------------------------------------------------------
# The console's lists, the stats and the dashboard read a little behind the writer without
# harm; a page that must show what was just written (a message's detail after an edit, a
# form's redisplay) is not marked and reads the writer.

_replica_reads = contextvars.ContextVar("mq_replica_reads", default=False)


def read_alias() -> str:
    """The database alias of reads that may lag the writer: "read" with DATABASE_READ_URL."""
    return str(settings.MQ_READ_DATABASE)


@contextmanager
def replica_reads() -> Iterator[None]:
    """ORM reads in this block go to `read_alias()`; writes still go to the writer."""
    token = _replica_reads.set(True)
    try:
        yield
    finally:
        _replica_reads.reset(token)


def reads_replica(view: Callable[P, R]) -> Callable[P, R]:
    """A view whose reads may go to the read database (see `replica_reads`)."""

    @functools.wraps(view)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with replica_reads():
            return view(*args, **kwargs)

    return wrapper


class ReadRouter:
    """Every write, and every read outside `replica_reads`, on the default database."""

    def db_for_read(self, model: Any, **hints: Any) -> str:
        return read_alias() if _replica_reads.get() else DEFAULT_DB_ALIAS

    def db_for_write(self, model: Any, **hints: Any) -> str:
        # Also for a row read from the read database: it is saved to the writer.
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        return True

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool:
        # The read database is the same data (another node, a replica): migrated through
        # the writer.
        return db == DEFAULT_DB_ALIAS
