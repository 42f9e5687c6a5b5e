"""The claim path's SQL, in one place: the claim queries, the row locks (messages, a group's
flow control), and the lease and finish updates. Multi-row inserts are in `sql_insert`.

On MySQL/MariaDB the optimizer may pick the shorter `(status, id)` index for a claim and
filesort the whole group's backlog; worse, on that plan MariaDB waits on locked rows instead
of skipping them. So the claim queries name their index. Other backends get the same query
from the ORM (PostgreSQL plans it well; SQLite takes no row locks and serializes writers).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import datetime
from typing import Any, NamedTuple

from django.db import DatabaseError, connection, transaction
from django.db.models import Count, DateTimeField, JSONField, Max, Min, QuerySet
from django.db.models.base import ModelState

from messages.models import PRIORITY_LEVELS, Message, Status

MESSAGE_COLUMNS = ", ".join(f"`{f.column}`" for f in Message._meta.concrete_fields)


def is_mysql() -> bool:
    return connection.vendor == "mysql"


@contextmanager
def short_transaction() -> Iterator[None]:
    """One short transaction of the hot path (a claim, an ack).

    On MySQL/MariaDB in autocommit, `START TRANSACTION` ... `COMMIT` in SQL: Django's `atomic`
    would also switch the session's autocommit off before and on after, two more round trips
    of a claim's five. Inside a caller's transaction, or on other databases, `atomic` (a
    savepoint there). `transaction.on_commit` callbacks need `atomic`: not for use here.
    """
    if connection.in_atomic_block or not is_mysql():
        with transaction.atomic():
            yield
        return
    with connection.cursor() as cursor:
        cursor.execute("START TRANSACTION")
        try:
            yield
        except BaseException:
            with suppress(DatabaseError):  # the connection may be what failed
                cursor.execute("ROLLBACK")
            raise
        cursor.execute("COMMIT")


# --- reading message rows without the ORM's per-query and per-row machinery ---------------
# A RawQuerySet costs ~0.5 ms to set up even when it finds nothing, and Model.__init__ with
# Django's converters ~15 us a row; the claim path reads up to a thousand rows a call.

_FIELDS = {f.attname: f for f in Message._meta.concrete_fields}


def _messages(query: str, params: Sequence[Any], attnames: Sequence[str] | None = None) -> list[Message]:
    """Run a MySQL SELECT of `attnames`' columns (every column by default) and build the
    Message instances directly; columns not read are deferred, as with `.only()`.

    MySQL hands back naive datetimes in the connection's time zone (UTC unless DATABASES
    sets one) and JSON as text: the same conversions Django's converters make. The
    instances skip `Model.__init__` (and its pre/post_init signals, which nothing here
    listens to); they behave as fetched rows (`_state.adding` False), so `save()` updates.
    """
    names = list(attnames or _FIELDS)
    datetimes = [i for i, name in enumerate(names) if isinstance(_FIELDS[name], DateTimeField)]
    jsons = [i for i, name in enumerate(names) if isinstance(_FIELDS[name], JSONField)]
    with connection.cursor() as cursor:
        cursor.execute(query, params)
        rows = cursor.fetchall()
    out = []
    new, db, zone = Message.__new__, connection.alias, connection.timezone
    for row in rows:
        values = list(row)
        for i in datetimes:
            if values[i] is not None:
                values[i] = values[i].replace(tzinfo=zone)
        for i in jsons:
            if values[i] is not None:
                values[i] = json.loads(values[i])
        message = new(Message)
        message.__dict__.update(zip(names, values, strict=True))
        state = message._state = ModelState()
        state.adding, state.db = False, db
        out.append(message)
    return out


def _id_list(ids: Iterable[int]) -> str:
    """Ids written inline: integers only (binding a hundred ids costs a Python call each)."""
    return ",".join(str(int(i)) for i in ids)


def locked_by_id(ids: Iterable[int], attnames: Sequence[str]) -> list[Message]:
    """These messages (the `attnames` columns only), row-locked for the caller's transaction."""
    ids = list(ids)
    if not ids:
        return []
    if is_mysql():
        columns = ", ".join(f"`{_FIELDS[name].column}`" for name in attnames)
        return _messages(
            f"SELECT {columns} FROM mq_message WHERE id IN ({_id_list(ids)}) FOR UPDATE",  # noqa: S608 - names from the model
            [], attnames,
        )
    return list(Message.objects.select_for_update().filter(id__in=ids).only(*attnames))


def expirable_locked(ids: Iterable[int], now: datetime) -> list[Message]:
    """Of these messages, the NEW ones past their expiry (id, attempt, status, expires_at, batch_id),
    locked for the caller's transaction; rows another transaction holds are skipped. Plain
    SQL on MySQL/MariaDB: a claim's transaction there is not Django's `atomic`."""
    ids = list(ids)
    if not ids:
        return []
    attnames = ("id", "attempt", "status", "expires_at", "batch_id")
    if is_mysql():
        return _messages(
            f"SELECT id, attempt, status, expires_at, batch_id FROM mq_message WHERE id IN ({_id_list(ids)}) "  # noqa: S608 - integers only
            "AND status = %s AND expires_at <= %s FOR UPDATE SKIP LOCKED",
            [Status.NEW, connection.ops.adapt_datetimefield_value(now)], attnames,
        )
    return list(
        Message.objects.select_for_update(skip_locked=True)
        .filter(id__in=ids, status=Status.NEW, expires_at__lte=now).only(*attnames)
    )


def claim_select(*, lock: bool) -> str:
    """The MySQL/MariaDB queue claim (parameters: topic, group, status, now, limit)."""
    return (
        f"SELECT {MESSAGE_COLUMNS} FROM mq_message FORCE INDEX (ix_msg_priority) "  # noqa: S608 - names from the model
        "WHERE topic = %s AND group_name = %s AND status = %s AND effect_time <= %s "
        f"ORDER BY priority DESC, effect_time, id LIMIT %s{' FOR UPDATE SKIP LOCKED' if lock else ''}"
    )


def claimable_rows(topic: str, group: str, now: datetime, limit: int, *, lock: bool) -> list[Message]:
    """Deliverable NEW rows of a group, highest priority first, then in (effect_time, id)
    order, along `ix_msg_priority`. With `lock`, taken FOR UPDATE SKIP LOCKED: rows another
    claimer holds are skipped."""
    if is_mysql():
        return _messages(
            claim_select(lock=lock), [topic, group, Status.NEW, connection.ops.adapt_datetimefield_value(now), limit]
        )
    rows = Message.objects.filter(topic=topic, group_name=group, status=Status.NEW, effect_time__lte=now)
    if lock:
        rows = rows.select_for_update(skip_locked=True)
    return list(rows.order_by("-priority", "effect_time", "id")[:limit])


# --- a group's NEW rows in (effect_time, id) order, whatever their priority ----------------
# `ix_msg_priority` (topic, group_name, status, -priority, effect_time, id) holds them in that
# order within each priority level; a second index in (topic, group_name, status,
# effect_time) order would be rewritten by every claim and every ack as well (docs/
# benchmarks.md, "Indexes and status changes"). So these readers take the first `limit` rows
# of each level, ten short ranges in one UNION ALL, and keep the first `limit` of those.

def _each_level(columns: str, op: str, topic: str, group: str, now: datetime, limit: int) -> tuple[str, list[Any]]:
    """The first `limit` NEW rows of each priority level whose effect_time is `op` now, in
    (effect_time, id) order, as one UNION ALL of ten index ranges, and its parameters."""
    select = (
        f"(SELECT {columns} FROM mq_message FORCE INDEX (ix_msg_priority) WHERE topic = %s AND group_name = %s "  # noqa: S608 - fixed text
        f"AND status = %s AND priority = %s AND effect_time {op} %s ORDER BY effect_time, id LIMIT %s)"
    )
    moment = connection.ops.adapt_datetimefield_value(now)
    params = [p for level in PRIORITY_LEVELS for p in (topic, group, Status.NEW, level, moment, limit)]
    return " UNION ALL ".join([select] * len(PRIORITY_LEVELS)), params


def due_in_time_order(topic: str, group: str, now: datetime, limit: int) -> list[Message]:
    """Deliverable NEW rows of a group in (effect_time, id) order, unlocked (the sharded
    claim's candidates: priority does not change a sharded group's order)."""
    if is_mysql():
        parts, params = _each_level(MESSAGE_COLUMNS, "<=", topic, group, now, limit)
        return _messages(f"{parts} ORDER BY effect_time, id LIMIT %s", [*params, limit])
    rows = Message.objects.filter(topic=topic, group_name=group, status=Status.NEW, effect_time__lte=now)
    return in_time_order(rows, limit)


def next_due(topic: str, group: str, now: datetime) -> datetime | None:
    """When the group's next delayed message comes due (one probe per priority level)."""
    if is_mysql():
        parts, params = _each_level("effect_time", ">", topic, group, now, 1)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT MIN(effect_time) FROM ({parts}) AS due", params)  # noqa: S608 - no input
            row = cursor.fetchone()
        return row[0].replace(tzinfo=connection.timezone) if row and row[0] else None
    rows = Message.objects.filter(topic=topic, group_name=group, status=Status.NEW, effect_time__gt=now)
    first = in_time_order(rows.only("effect_time"), 1)
    return first[0].effect_time if first else None


def oldest_due(topic: str, group: str, now: datetime) -> datetime | None:
    """The effect_time of the group's oldest deliverable NEW message (a console or API read)."""
    due = Message.objects.filter(topic=topic, group_name=group, status=Status.NEW, effect_time__lte=now)
    first = in_time_order(due.values("id", "effect_time"), 1)
    return first[0]["effect_time"] if first else None


def in_time_order(rows: QuerySet[Any], limit: int) -> list[Any]:
    """The first `limit` of `rows` (one group's NEW rows, any further filters; model
    instances or `.values()` holding effect_time and id) in (effect_time, id) order, one
    range per priority level. SQLite cannot order and limit the parts of a UNION: there
    (the quick start) it is the plain query."""
    if rows.query.is_empty():  # .none(): union() would hand back its first, sliced, part
        return []
    ordered = rows.order_by("effect_time", "id")
    if not connection.features.supports_slicing_ordering_in_compound:
        return list(ordered[:limit])
    levels = [ordered.filter(priority=level)[:limit] for level in PRIORITY_LEVELS]
    return list(levels[0].union(*levels[1:], all=True).order_by("effect_time", "id")[:limit])


class GroupFlow(NamedTuple):
    """A group's flow-control columns, read under its row's lock."""

    paused: bool
    max_in_flight: int | None
    rate_per_second: float | None
    rate_tokens: float
    rate_refilled_at: datetime | None
    key_concurrency: int


def lock_group(group_pk: int) -> GroupFlow | None:
    """Lock a group's row for the caller's transaction and read its flow control (serial,
    sharded and flow-controlled claims decide one at a time per group). SQLite has no row
    locks: its writers queue for the database. None if the group is gone."""
    table = connection.ops.quote_name("topics_topicgroup")
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT paused, max_in_flight, rate_per_second, rate_tokens, rate_refilled_at, key_concurrency "  # noqa: S608 - a quoted table name
            f"FROM {table} WHERE id = %s{lock}", [group_pk],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    refilled = row[4]
    if isinstance(refilled, str):  # SQLite hands back text
        refilled = datetime.fromisoformat(refilled)
    if refilled is not None and refilled.tzinfo is None:
        refilled = refilled.replace(tzinfo=connection.timezone)
    return GroupFlow(bool(row[0]), row[1], row[2], float(row[3]), refilled, row[5])


def spend_tokens(group_pk: int, tokens: float, now: datetime) -> None:
    """Store a rate-limited group's bucket after a claim (under the claim's group lock)."""
    table = connection.ops.quote_name("topics_topicgroup")
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET rate_tokens = %s, rate_refilled_at = %s WHERE id = %s",  # noqa: S608 - a quoted table name
            [tokens, connection.ops.adapt_datetimefield_value(now), group_pk],
        )


def running_count(topic: str, group: str) -> int:
    """RUNNING messages of a group (few by design), along `ix_msg_order`."""
    return Message.objects.filter(topic=topic, group_name=group, status=Status.RUNNING).count()


def group_head(topic: str, group: str, status: str) -> Message | None:
    """The lowest-id message of a group in a status, along `ix_msg_order`: the primary key
    would read the group's whole finished history first."""
    if is_mysql():
        rows = _messages(
            f"SELECT {MESSAGE_COLUMNS} FROM mq_message FORCE INDEX (ix_msg_order) "  # noqa: S608 - columns from the model
            "WHERE topic = %s AND group_name = %s AND status = %s ORDER BY id LIMIT 1",
            [topic, group, status],
        )
        return rows[0] if rows else None
    return Message.objects.filter(topic=topic, group_name=group, status=status).order_by("id").first()


def per_key(topic: str, group: str, keys: Collection[str], status: str, *, head: bool) -> dict[str, int]:
    """For each of these keys of a group: how many of its messages are in `status`, or with
    `head` the lowest id among them. Along `ix_msg_key`, which on MySQL/MariaDB holds
    `key_status` (a keyed message's status) in place of `status` (migration 0011), so the
    condition is on that column there."""
    if not keys:
        return {}
    if is_mysql():
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT msg_key, {'MIN(id)' if head else 'COUNT(*)'} FROM mq_message FORCE INDEX (ix_msg_key) "  # noqa: S608 - fixed text and placeholders
                f"WHERE msg_key IN ({', '.join(['%s'] * len(keys))}) AND topic = %s AND group_name = %s "
                "AND key_status = %s GROUP BY msg_key",
                [*keys, topic, group, status],
            )
            return dict(cursor.fetchall())
    rows = Message.objects.filter(key__in=keys, topic=topic, group_name=group, status=status).values("key")
    return dict(rows.annotate(n=Min("id") if head else Count("id")).values_list("key", "n"))


def expired_ids(now: datetime, limit: int) -> list[int]:
    """Up to `limit` NEW messages whose expiry has passed, the earliest first, along
    `ix_msg_expiry`, which on MySQL/MariaDB holds `expiry_status` (the status of a message
    with an expiry) in place of `status` (migration 0011)."""
    if is_mysql():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT id FROM mq_message FORCE INDEX (ix_msg_expiry) WHERE expiry_status = %s AND expires_at <= %s "
                "ORDER BY expires_at LIMIT %s",
                [Status.NEW, connection.ops.adapt_datetimefield_value(now), limit],
            )
            return [row[0] for row in cursor.fetchall()]
    rows = Message.objects.filter(status=Status.NEW, expires_at__lte=now).order_by("expires_at")
    return list(rows.values_list("id", flat=True)[:limit])


def lease(
    ids: list[int], owner: str, rank: tuple[int | None, int | None], expires: datetime, now: datetime
) -> int:
    """NEW rows to RUNNING under `owner`'s lease, each holding its pull (the owner's rank and
    total): one UPDATE, conditional on status = NEW. Returns how many rows changed.

    Plain SQL: the ORM spends ~1.5 ms compiling a 100-id IN list per claim.
    """
    if not ids:
        return 0
    adapt = connection.ops.adapt_datetimefield_value
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE mq_message SET status = %s, lease_owner = %s, pulled_rank = %s, pulled_total = %s, "  # noqa: S608 - integers and placeholders only
            f"lease_expires_at = %s, attempt = attempt + 1, update_time = %s, pulled_at = %s WHERE id IN ({_id_list(ids)}) "
            "AND status = %s",
            [Status.RUNNING, owner, rank[0], rank[1], adapt(expires), adapt(now), adapt(now), Status.NEW],
        )
        return cursor.rowcount


def finish(ids: Iterable[int], status: str, now: datetime) -> None:
    """Finished messages: `status`, lease cleared (plain SQL, as `lease`)."""
    ids = list(ids)
    if not ids:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE mq_message SET status = %s, lease_expires_at = NULL, update_time = %s WHERE id IN ({_id_list(ids)})",  # noqa: S608 - integers and placeholders only
            [status, connection.ops.adapt_datetimefield_value(now)],
        )


def first_id_added_since(moment: datetime) -> int | None:
    """The lowest id whose `add_time` is at or after `moment`, by binary search on the primary
    key (a few dozen point reads, whatever the table size). None when every row is older.

    Ids grow with add_time (give or take clock skew between broker processes), so rows from
    this id on were added after `moment`; since update_time >= add_time, none of them can
    have finished before it either. Scans for old finished rows stop here.
    """
    bounds = Message.objects.aggregate(low=Min("id"), high=Max("id"))
    low, high = bounds["low"], bounds["high"]
    if low is None:
        return None
    top = high + 1  # the answer when every row is older
    high = top
    while low < high:
        middle = (low + high) // 2
        row = Message.objects.filter(id__gte=middle).order_by("id").values_list("id", "add_time").first()
        if row is None or row[1] >= moment:
            high = middle  # no id lies between middle and row's id, so either bounds the same rows
        else:
            low = row[0] + 1
    return None if low >= top else low
