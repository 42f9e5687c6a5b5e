"""Fair delivery across keys: a queue group with `fair_keys` claims round-robin over message keys.

The keys with due NEW messages form a cycle in key order, the messages without a key first
(one key of their own). A claim of N starts after the key the group's last claim served
(its cursor, `TopicGroup.fair_after`) and takes the oldest due message of each next key,
wrapping round the cycle, before a second message of any key: with K keys due, it takes
ceil(N / K) rounds (fewer when a key runs out). So one key's burst of 100,000 messages
delays another key's single message by one claim at most. Within a key the order is
(effect_time, id); priority is ignored by fair claims (documented in docs/delivery.md).

The cursor is state, so it lives on the group's row: the claim locks that row, reads the
cursor and stores the last key it served, one claimer at a time per fair group (as flow
control does). Rows are still taken FOR UPDATE SKIP LOCKED: the expiry sweep or an operator
may hold some.

Statements on MariaDB, each along `ix_msg_fair` (topic, group_name, status, msg_key,
effect_time): the next keys after the cursor by a loose index scan (GROUP BY msg_key with
MIN(effect_time): one index dive per key, whatever each key's backlog), a second one from the
cycle's start when it wraps, the oldest due ids of each key (one short range per key, UNION
ALL), then the rows locked by id. Keys compare as the column's collation compares them (under
a case-insensitive one, "a" and "A" are one key). Groups without the option never come here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import F, Min, Q, QuerySet

from messages.delivery import sql
from messages.models import Message, Status

KEYLESS = "-"  # the cursor after the messages without a key; a key is stored as "k" + key
_MISSING = object()
FILL_PASSES = 4  # a claim falls short only when keys run out in a way this many passes cannot fill


def fair_cursor_locked(group_pk: int) -> str | None:
    """Lock the group's row (the caller's transaction) and read its cursor."""
    table = connection.ops.quote_name("topics_topicgroup")
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT fair_after FROM {table} WHERE id = %s{lock}", [group_pk])  # noqa: S608 - a quoted name
        row = cursor.fetchone()
    return row[0] if row else None


def fair_advance(group_pk: int, rows: list[Message]) -> None:
    """Store the key of the claim's last row as the group's cursor (under the same lock)."""
    if not rows:
        return
    key = rows[-1].key
    table = connection.ops.quote_name("topics_topicgroup")
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET fair_after = %s WHERE id = %s",  # noqa: S608 - a quoted name
                       [KEYLESS if key is None else "k" + key, group_pk])


def fair_claimable_rows(topic: str, group: str, now: datetime, limit: int, cursor: str | None) -> list[Message]:
    """Up to `limit` due NEW rows of the group, round-robin over keys from after `cursor`,
    locked FOR UPDATE SKIP LOCKED, in claim order."""
    keys = fair_cycle(topic, group, now, limit, cursor)
    if not keys:
        return []
    heads = _fill(topic, group, now, keys, limit)
    order: list[int] = []
    for turn in range(max(len(ids) for ids in heads)):
        order.extend(ids[turn] for ids in heads if turn < len(ids))
    order = order[:limit]
    position = {row_id: index for index, row_id in enumerate(order)}
    if sql.is_mysql():  # in `sql.short_transaction`'s SQL transaction, which the ORM does not see
        rows = sql._messages(
            f"SELECT {sql.MESSAGE_COLUMNS} FROM mq_message WHERE id IN ({sql._id_list(order)}) "  # noqa: S608 - integers and names from the model
            "AND status = %s FOR UPDATE SKIP LOCKED", [Status.NEW])
    else:
        rows = list(Message.objects.select_for_update(skip_locked=True).filter(id__in=order, status=Status.NEW))
    rows.sort(key=lambda m: position[m.id])
    return rows


def fair_cycle(topic: str, group: str, now: datetime, limit: int, cursor: str | None) -> list[str | None]:
    """The next `limit` keys (None: no key) with due NEW messages after `cursor`, in cycle
    order, each once: those after the cursor, then from the cycle's start up to the cursor."""
    if cursor is None:  # the start of a round: no key, then every key
        return _keys(topic, group, now, limit, after=None, keyless=True)
    after: Any = None if cursor == KEYLESS else cursor[1:]
    keys = _keys(topic, group, now, limit, after=after, keyless=False)
    if len(keys) < limit:  # wrap: the messages without a key, then the keys up to the cursor
        keys += _keys(topic, group, now, limit - len(keys), upto=after, keyless=True)
    return keys


def _keys(
    topic: str, group: str, now: datetime, limit: int, *, after: Any = _MISSING, upto: Any = _MISSING,
    keyless: bool,
) -> list[str | None]:
    """Keys with due NEW messages in key order, no key first (`keyless`): those after `after`
    (None: every key), or those up to and including `upto` (None: no key at all)."""
    if limit <= 0 or (upto is None and not keyless):
        return []
    if sql.is_mysql():
        if after is not _MISSING:
            condition, params = ("msg_key IS NOT NULL", []) if after is None else ("msg_key > %s", [after])
            if keyless:
                condition = f"(msg_key IS NULL OR {condition})"
        elif upto is None:
            condition, params = "msg_key IS NULL", []
        else:
            condition, params = "(msg_key IS NULL OR msg_key <= %s)", [upto]
        with connection.cursor() as db:
            db.execute(
                "SELECT msg_key, MIN(effect_time) FROM mq_message FORCE INDEX (ix_msg_fair) "  # noqa: S608 - fixed text
                f"WHERE topic = %s AND group_name = %s AND status = %s AND {condition} AND effect_time <= %s "
                "GROUP BY msg_key ORDER BY msg_key LIMIT %s",
                [topic, group, Status.NEW, *params, connection.ops.adapt_datetimefield_value(now), limit],
            )
            return [row[0] for row in db.fetchall()]
    due = _due(topic, group, now)
    if after is not _MISSING:
        keyed = Q(key__isnull=False) if after is None else Q(key__gt=after)
        due = due.filter(keyed | Q(key__isnull=True)) if keyless else due.filter(keyed)
    elif upto is None:
        due = due.filter(key__isnull=True)
    else:
        due = due.filter(Q(key__isnull=True) | Q(key__lte=upto))
    # GROUP BY key; NULL first, as MariaDB sorts it (PostgreSQL sorts NULL last by default).
    return list(due.values("key").annotate(first=Min("effect_time"))
                .order_by(F("key").asc(nulls_first=True)).values_list("key", flat=True)[:limit])


def _fill(topic: str, group: str, now: datetime, keys: list[str | None], limit: int) -> list[list[int]]:
    """Each key's oldest due ids, enough for `limit` in round-robin order: ceil(limit / keys)
    of each key first; while that falls short because some keys ran out, more of the keys
    that did not (each pass reads at most the shortfall plus a row per key)."""
    found: list[list[tuple[Any, int]]] = [[] for _ in keys]
    asks = dict.fromkeys(range(len(keys)), -(-limit // len(keys)))
    for _ in range(FILL_PASSES):
        slots = list(asks)
        got = _heads(topic, group, now, [(keys[s], found[s][-1] if found[s] else None, asks[s]) for s in slots])
        full = []
        for slot, rows in zip(slots, got, strict=True):
            found[slot] += rows
            if len(rows) == asks[slot]:
                full.append(slot)
        short = limit - sum(len(rows) for rows in found)
        if short <= 0 or not full:
            break
        asks = dict.fromkeys(full, -(-short // len(full)))
    return [[row_id for _, row_id in rows] for rows in found]


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
                f"(SELECT {slot} AS slot, effect_time, id FROM mq_message FORCE INDEX (ix_msg_fair) "
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
