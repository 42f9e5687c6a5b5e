"""Multi-row INSERTs without the ORM's per-instance and per-value costs: the message rows a
produce stores (`NewMessage`), and the rows other writers store in bulk (copies made by a
replay, move, redrive or batch, trace rows). The reads, locks and updates of the claim path
are in `sql`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from django.db import connection
from django.db.models import DateTimeField, Field, JSONField, Model

from messages.delivery.sql import is_mysql
from messages.models import DEFAULT_PRIORITY


class NewMessage(NamedTuple):
    """A message row to insert: each field names a column of `Message` (`insert_values`);
    the columns left out are NULL."""

    topic: str
    group_name: str
    data: str
    key: str | None
    headers: dict[str, str]
    status: str
    effect_time: datetime
    retry_remaining: int
    attempt: int
    timeout_seconds: int
    dedup_key: str | None
    last_log: str
    add_time: datetime
    update_time: datetime
    producer: str
    publish_id: int | None
    priority: int = DEFAULT_PRIORITY
    expires_at: datetime | None = None
    copied_at: datetime | None = None  # a copy's (replay, redrive, move): when it was made
    tag: str | None = None
    batch_id: str | None = None
    dedup_until: datetime | None = None


INSERT_CHUNK = 500
# On PostgreSQL, the column types whose Python values (as the callers build them: str,
# int, bool, aware datetime, None) go into an array literal as they are (`_pg_array`).
_PG_AS_IS = frozenset({"CharField", "TextField", "IntegerField", "BigIntegerField", "SmallIntegerField",
                       "PositiveIntegerField", "PositiveSmallIntegerField", "PositiveBigIntegerField",
                       "BooleanField", "DateTimeField"})


def _adapter(field: Field[Any, Any], mysql: bool) -> Callable[[Any], Any]:
    """Per-column conversion to a database parameter, chosen once per insert.

    Django's `get_db_prep_save` costs ~10 us a value; on MySQL the conversions are simple
    enough to do directly, and a batch's rows share their timestamps, so each distinct one
    is converted once. Other backends keep Django's (their JSON adapters differ).
    """
    if not mysql:
        return lambda value: field.get_db_prep_save(value, connection)
    if isinstance(field, DateTimeField):
        seen: dict[Any, Any] = {}

        def adapt_datetime(value: Any) -> Any:
            if value not in seen:
                seen[value] = connection.ops.adapt_datetimefield_value(value)
            return seen[value]

        return adapt_datetime
    if isinstance(field, JSONField):
        return lambda value: None if value is None else json.dumps(value)
    return lambda value: value


def _pg_adapter(field: Field[Any, Any]) -> Callable[[Any], Any]:
    """On PostgreSQL, a column's values as `_pg_array` writes them: JSON as its text, the
    plain types of `_PG_AS_IS` as they are."""
    if isinstance(field, JSONField):
        encoder = field.encoder
        return lambda value: None if value is None else json.dumps(value, cls=encoder)
    return lambda value: value


def insert_statements(count: int, *, return_ids: bool) -> int:
    """How many statements `insert_values` sends for `count` rows."""
    if return_ids and not connection.features.can_return_rows_from_bulk_insert:
        return count
    return -(-count // INSERT_CHUNK)


def insert_values(model: type[Model], rows: Sequence[NamedTuple], *, return_ids: bool) -> list[int]:
    """Multi-row INSERT of named tuples, each field naming a column of `model` by its
    attribute name, without the ORM's per-instance and per-value costs. With `return_ids`,
    answers the new ids in row order.

    Ids come from `RETURNING` where the backend returns rows from a multi-row insert
    (MariaDB >= 10.5, PostgreSQL, SQLite), else from one insert per row (MySQL 8, TiDB:
    their auto-increment values within one statement need not be consecutive).
    """
    if not rows:
        return []
    by_name = {f.attname: f for f in model._meta.concrete_fields}
    fields = [by_name[name] for name in type(rows[0])._fields]
    # PostgreSQL: a column of the plain types goes as one array literal (`_pg_array`).
    pg_arrays = connection.vendor == "postgresql" and all(
        f.get_internal_type() in _PG_AS_IS or isinstance(f, JSONField) for f in fields)
    mysql = is_mysql()
    adapters = [_pg_adapter(f) if pg_arrays else _adapter(f, mysql) for f in fields]
    quote = connection.ops.quote_name
    columns = ", ".join(quote(f.column) for f in fields)
    row_marks = "(" + ", ".join(["%s"] * len(fields)) + ")"
    # Each column's array cast to its type without length (varchar[], not varchar(200)[]).
    casts = ", ".join(f"(%s)::{f.db_type(connection).split('(')[0]}[]" for f in fields) if pg_arrays else ""
    table, pk = quote(model._meta.db_table), quote(model._meta.pk.column)
    one_by_one = return_ids and not connection.features.can_return_rows_from_bulk_insert
    chunk_size = 1 if one_by_one else INSERT_CHUNK
    ids: list[int] = []
    with connection.cursor() as cursor:
        for start in range(0, len(rows), chunk_size):
            chunk = rows[start : start + chunk_size]
            if mysql and not one_by_one:
                statement = f"INSERT INTO {table} ({columns}) VALUES ".encode() + _mysql_rows(chunk, adapters)  # noqa: S608 - names from the model
                if return_ids:
                    cursor.execute(statement + f" RETURNING {pk}".encode())
                    ids.extend(new_id for (new_id,) in cursor.fetchall())
                else:
                    cursor.execute(statement)
                continue
            if pg_arrays and not one_by_one:
                # A parameter per column (an array literal of its values), not per value:
                # psycopg parses a statement of 2,500 placeholders on every call, and quotes
                # a list's elements one by one in Python. Rows come back from RETURNING in
                # UNNEST's order, as Django's own bulk_create relies on.
                text = f"INSERT INTO {table} ({columns}) SELECT * FROM UNNEST({casts})"  # noqa: S608 - names from the model
                params = [_pg_array([adapt(value) for value in values])
                          for values, adapt in zip(zip(*chunk, strict=True), adapters, strict=True)]
            else:
                params = [adapt(value) for row in chunk for adapt, value in zip(adapters, row, strict=True)]
                text = f"INSERT INTO {table} ({columns}) VALUES " + ", ".join([row_marks] * len(chunk))  # noqa: S608 - names from the model
            if one_by_one:
                cursor.execute(text, params)
                ids.append(connection.ops.last_insert_id(cursor, model._meta.db_table, model._meta.pk.column))
            elif return_ids:
                cursor.execute(f"{text} RETURNING {pk}", params)
                ids.extend(new_id for (new_id,) in cursor.fetchall())
            else:
                cursor.execute(text, params)
    return ids


def _pg_array(values: list[Any]) -> str:
    """A PostgreSQL array literal of plain values (text, numbers, booleans, datetimes, None),
    which the statement casts to its column's array type: one string for psycopg to quote,
    each element double-quoted with its backslashes and double quotes escaped."""
    parts = []
    for value in values:
        if value is None:
            parts.append("NULL")
            continue
        text = value.isoformat() if isinstance(value, datetime) else str(value)
        parts.append('"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"')
    return "{" + ",".join(parts) + "}"


def _mysql_rows(rows: Sequence[Sequence[Any]], adapters: list[Callable[[Any], Any]]) -> bytes:
    """The VALUES list of a multi-row INSERT, escaped by mysqlclient itself.

    mysqlclient escapes every parameter through a Python-level call (~1.4 us); a produce of
    100 messages has 2,500 of them, most the same value all down a column (topic, status,
    timestamps, NULL). Escaped column by column: a column holding one value throughout is
    adapted and escaped once; in the others each distinct short value is escaped once.
    """
    literal = connection.connection.literal
    count = len(rows)
    columns: list[list[bytes]] = []
    for values, adapt in zip(zip(*rows, strict=True), adapters, strict=True):
        first = values[0]
        if values.count(first) == count:  # C-speed: identity first, then ==
            columns.append([literal(adapt(first))] * count)
            continue
        seen: dict[Any, bytes] = {}
        escaped = []
        for value in values:
            adapted = adapt(value)
            if type(adapted) is str and len(adapted) > 64:
                escaped.append(literal(adapted))
                continue
            key = (type(adapted), adapted)
            if key not in seen:
                seen[key] = literal(adapted)
            escaped.append(seen[key])
        columns.append(escaped)
    return b", ".join([b"(" + b", ".join(row) + b")" for row in zip(*columns, strict=True)])
