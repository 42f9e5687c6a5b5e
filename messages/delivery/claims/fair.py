"""Fair delivery across keys: a queue group with `fair_keys` claims round-robin over message keys.

The keys with due NEW messages form a cycle in key order, the messages without a key first
(one key of their own). A claim of N starts after the key the group's last claim served
(its cursor, `TopicGroup.fair_after`) and takes the oldest due message of each next key,
wrapping round the cycle, before a second message of any key: with K keys due, it takes
ceil(N / K) rounds, the keys that still have messages filling in for those that ran out.
So one key's burst of 100,000 messages delays another key's single message by one claim at
most. Within a key the order is (effect_time, id); fair claims do not use priority (docs/api.md).

The cursor is state, so it lives on the group's row: the claim locks that row, reads the
cursor and stores the last key it served, one claimer at a time per fair group (as flow
control does). Rows are still taken FOR UPDATE SKIP LOCKED: the expiry sweep or an operator
may hold some.

Statements on MariaDB, each along `ix_msg_fair` (topic, group_name, status, msg_key,
effect_time): the next N keys after the cursor by a loose index scan (SELECT DISTINCT: one
index dive per key, whatever each key's backlog; a second one from the cycle's start when it
wraps), the oldest due row of each (one short range per key, UNION ALL; keys with none due
drop out and the next keys are read), more rows of the keys that have them while the claim
is short, then the rows locked by id. Typically five statements besides the lease. Keys
compare as the column's collation compares them (under a case-insensitive one, "a" and "A"
are one key). Groups without the option never come here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Q, QuerySet

from messages.delivery import sql
from messages.models import Message, Status

KEYLESS = "-"  # the cursor after the messages without a key; a key is stored as "k" + key
_MISSING = object()
# Passes reading more keys (when keys read have nothing due) and more rows (when keys run
# out): a claim reads at most this many times N keys. Past that many keys in a row with
# only delayed messages it comes back short; the cursor moves past them, and the next
# claim goes on from there.
FILL_PASSES = 4


def fair_cursor_locked(group_pk: int) -> str | None:
    """Lock the group's row (the caller's transaction) and read its cursor."""
    table = connection.ops.quote_name("topics_topicgroup")
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT fair_after FROM {table} WHERE id = %s{lock}", [group_pk])  # noqa: S608 - a quoted name
        row = cursor.fetchone()
    return row[0] if row else None


def fair_advance(group_pk: int, cursor: str | None) -> None:
    """Store the group's cursor (under the claim's lock); None: leave it."""
    if cursor is None:
        return
    table = connection.ops.quote_name("topics_topicgroup")
    with connection.cursor() as db:
        db.execute(f"UPDATE {table} SET fair_after = %s WHERE id = %s", [cursor, group_pk])  # noqa: S608 - a quoted name


def _position(key: str | None) -> str:
    return KEYLESS if key is None else "k" + key


class FairPick:
    """One fair claim's choice of rows (`rows`, for `expiry.claimed_live`, which may ask
    again after expiring some) and where the group's cursor goes after it (`cursor_after`)."""

    def __init__(self, topic: str, group: str, now: datetime, limit: int, cursor: str | None) -> None:
        self.topic, self.group, self.now, self.limit, self.cursor = topic, group, now, limit, cursor
        self.turn: dict[int, int] = {}
        self.last_read: str | None = None  # the cycle position of the last key read

    def rows(self) -> list[Message]:
        """Up to `limit` due NEW rows of the group, round-robin over keys from after the
        cursor, locked FOR UPDATE SKIP LOCKED, in claim order."""
        topic, group, now, limit = self.topic, self.group, self.now, self.limit
        cycle = _Cycle(topic, group, self.cursor)
        self.last_read = None
        keys: list[str | None] = []
        found: list[list[tuple[Any, int]]] = []
        for _ in range(FILL_PASSES):  # the next keys and each one's oldest due row; keys with none drop out
            more = cycle.take(limit - len(keys))
            if not more:
                break
            for key, rows in zip(more, _heads(topic, group, now, [(key, None, 1) for key in more]), strict=True):
                if key is not None or rows:  # the keys read all have NEW rows; no key is always asked
                    self.last_read = _position(key)
                if rows:
                    keys.append(key)
                    found.append(rows)
            if len(keys) >= limit:
                break
        if not keys:
            return []
        _fill(topic, group, now, keys, found, limit)
        order: list[int] = []
        self.turn = {}
        for turn in range(max(len(rows) for rows in found)):
            for rows in found:
                # under a case-insensitive collation two spellings of a key share rows
                if turn < len(rows) and rows[turn][1] not in self.turn:
                    self.turn[rows[turn][1]] = turn
                    order.append(rows[turn][1])
        order = order[:limit]
        position = {row_id: index for index, row_id in enumerate(order)}
        if sql.is_mysql():  # in `sql.short_transaction`'s SQL transaction, which the ORM does not see
            locked = sql._messages(
                f"SELECT {sql.MESSAGE_COLUMNS} FROM mq_message WHERE id IN ({sql._id_list(order)}) "  # noqa: S608 - integers and names from the model
                "AND status = %s FOR UPDATE SKIP LOCKED", [Status.NEW])
        else:
            locked = list(Message.objects.select_for_update(skip_locked=True).filter(id__in=order, status=Status.NEW))
        locked.sort(key=lambda m: position[m.id])
        return locked

    def cursor_after(self, leased: list[Message]) -> str | None:
        """The key served last; when the claim ended in its first round, the last key read
        (the keys read after the last served had nothing due), so that the next claim moves
        on past keys with only delayed messages. None: leave the cursor."""
        if leased and self.turn.get(leased[-1].id, 0) > 0:
            return _position(leased[-1].key)
        return self.last_read or (_position(leased[-1].key) if leased else None)


class _Cycle:
    """The group's keys in cycle order from after a cursor, read on demand: the keys after
    it, the messages without a key (always a candidate: their rows say whether any is due),
    then the keys up to it. Keys are read whether or not they have due messages (a loose
    scan cannot test effect_time); the claim drops those without."""

    def __init__(self, topic: str, group: str, cursor: str | None) -> None:
        self.topic, self.group = topic, group
        # (lower bound, exclusive; upper bound, inclusive) of a range of keys; None: no key.
        self.ranges: list[tuple[Any, Any] | None]
        if cursor is None:  # the start of a round
            self.ranges = [None, (_MISSING, _MISSING)]
        elif cursor == KEYLESS:
            self.ranges = [(_MISSING, _MISSING), None]
        else:
            self.ranges = [(cursor[1:], _MISSING), None, (_MISSING, cursor[1:])]
        self.after: Any = _MISSING  # within the current range: the last key read

    def take(self, count: int) -> list[str | None]:
        out: list[str | None] = []
        while len(out) < count and self.ranges:
            span = self.ranges[0]
            if span is None:
                out.append(None)
                self.ranges.pop(0)
                continue
            lower = span[0] if self.after is _MISSING else self.after
            want = count - len(out)
            keys = _distinct_keys(self.topic, self.group, lower, span[1], want)
            out += keys
            if len(keys) < want:
                self.ranges.pop(0)
                self.after = _MISSING
            else:
                self.after = keys[-1]
        return out


def _distinct_keys(topic: str, group: str, lower: Any, upper: Any, limit: int) -> list[str]:
    """Up to `limit` distinct keys of the group's NEW messages, in key order, after `lower`
    and up to `upper` (_MISSING: unbounded). MariaDB reads them by a loose index scan: one
    index dive per key, however many messages a key holds (SELECT DISTINCT of the index's
    leading columns; a condition on effect_time would turn it into a scan of every entry)."""
    if sql.is_mysql():
        bounds, params = "", []
        if lower is not _MISSING:
            bounds, params = " AND msg_key > %s", [lower]
        else:
            bounds = " AND msg_key IS NOT NULL"
        if upper is not _MISSING:
            bounds += " AND msg_key <= %s"
            params.append(upper)
        with connection.cursor() as db:
            db.execute(
                "SELECT DISTINCT topic, group_name, status, msg_key FROM mq_message FORCE INDEX (ix_msg_fair) "  # noqa: S608 - fixed text
                f"WHERE topic = %s AND group_name = %s AND status = %s{bounds} LIMIT %s",
                [topic, group, Status.NEW, *params, limit],
            )
            return [row[3] for row in db.fetchall()]  # in index order: the loose scan's
    rows = Message.objects.filter(topic=topic, group_name=group, status=Status.NEW, key__isnull=False)
    if lower is not _MISSING:
        rows = rows.filter(key__gt=lower)
    if upper is not _MISSING:
        rows = rows.filter(key__lte=upper)
    return list(rows.order_by("key").values_list("key", flat=True).distinct()[:limit])


def _fill(
    topic: str, group: str, now: datetime, keys: list[str | None], found: list[list[tuple[Any, int]]], limit: int,
) -> None:
    """More of each key's oldest due rows (into `found`), enough for `limit` in round-robin
    order: ceil(shortfall / keys) more of each key that may have more, again while keys run
    out (each pass reads at most the shortfall plus a row per key)."""
    full = [slot for slot, rows in enumerate(found) if len(rows) == 1]
    for _ in range(FILL_PASSES):
        short = limit - sum(len(rows) for rows in found)
        if short <= 0 or not full:
            return
        ask = -(-short // len(full))
        got = _heads(topic, group, now, [(keys[slot], found[slot][-1], ask) for slot in full])
        for slot, rows in zip(full, got, strict=True):
            found[slot] += rows
        full = [slot for slot, rows in zip(full, got, strict=True) if len(rows) == ask]


def _due(topic: str, group: str, now: datetime) -> QuerySet[Message]:
    return Message.objects.filter(topic=topic, group_name=group, status=Status.NEW, effect_time__lte=now)


def _heads(
    topic: str, group: str, now: datetime, asks: list[tuple[str | None, tuple[Any, int] | None, int]],
) -> list[list[tuple[Any, int]]]:
    """For each (key, after, count): the (effect_time, id) of the key's oldest `count` due NEW
    rows after `after` (an (effect_time, id); None: from the first), in that order."""
    if sql.is_mysql():
        adapt = connection.ops.adapt_datetimefield_value
        parts, params = [], []
        for slot, (key, after, count) in enumerate(asks):
            later = "" if after is None else " AND (effect_time > %s OR (effect_time = %s AND id > %s))"
            parts.append(
                f"(SELECT {slot} AS slot, effect_time, id FROM mq_message FORCE INDEX (ix_msg_fair) "  # noqa: S608 - fixed text
                "WHERE topic = %s AND group_name = %s AND status = %s AND "
                f"{'msg_key IS NULL' if key is None else 'msg_key = %s'} AND effect_time <= %s{later} "
                f"ORDER BY effect_time, id LIMIT {int(count)})")
            params += [topic, group, Status.NEW, *([] if key is None else [key]), adapt(now)]
            if after is not None:
                params += [adapt(after[0]), adapt(after[0]), after[1]]
        with connection.cursor() as db:
            db.execute(" UNION ALL ".join(parts), params)
            rows = db.fetchall()
        zone = connection.timezone
        heads: list[list[tuple[Any, int]]] = [[] for _ in asks]
        for slot, effect_time, row_id in rows:
            heads[slot].append((effect_time.replace(tzinfo=zone), row_id))
        return [sorted(found) for found in heads]  # UNION ALL need not keep each part's order
    # PostgreSQL and SQLite compare keys exactly: the key names its part.
    parts_qs = []
    for key, after, count in asks:
        due = _due(topic, group, now).filter(Q(key__isnull=True) if key is None else Q(key=key))
        if after is not None:
            due = due.filter(Q(effect_time__gt=after[0]) | Q(effect_time=after[0], id__gt=after[1]))
        parts_qs.append(due.order_by("effect_time", "id").values_list("key", "effect_time", "id")[:count])
    slots = {key: slot for slot, (key, _, _) in enumerate(asks)}
    by_slot: list[list[tuple[Any, int]]] = [[] for _ in asks]
    if connection.features.supports_slicing_ordering_in_compound:  # PostgreSQL: one statement
        found = list(parts_qs[0].union(*parts_qs[1:], all=True))
    else:  # SQLite: one per key (its claims serialize anyway)
        found = [row for part in parts_qs for row in part]
    for key, effect_time, row_id in found:
        by_slot[slots[key]].append((effect_time, row_id))
    return [sorted(found) for found in by_slot]
