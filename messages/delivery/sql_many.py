"""The hot path's statements for many rows and owners at once: a pull's clean batch ack
(`succeed_held`), and leases of several parked pulls claimed for together (`lease_many`).
Plain SQL with ids written inline, as in `sql.py`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connection

from messages.delivery.sql import _id_list
from messages.models import Status, TraceEvent


def succeed_held(ids: Sequence[int], *, topic: str, group: str, owner: str, now: datetime) -> int:
    """The clean ack of a batch, for a pull of (`topic`, `group`) that carries it: these
    messages to SUCCESS, each only if `owner` still holds it, by guarded UPDATEs (no read
    first, no lock but the rows they change). A first delivery's success writes no trace
    row (its row holds it, `trace.holds_ack`), so a steady consumer's batch is one UPDATE of
    attempt-1 rows; only when some rows were left over does a second UPDATE take the later
    attempts and one INSERT ... SELECT copy their "acked" trace rows from the rows it
    changed. The rows changed are told apart by their `update_time` = `now` (this call's
    microsecond) under `owner`: `succeeded_now`. Returns how many rows changed. A batch's
    members are left to the row-by-row path, which counts them towards their batch
    (`batches_finished`)."""
    if not ids:
        return 0
    adapt = connection.ops.adapt_datetimefield_value
    update = (
        "UPDATE mq_message SET status = %s, lease_expires_at = NULL, update_time = %s "  # noqa: S608 - integers and placeholders only
        f"WHERE id IN ({_id_list(ids)}) AND topic = %s AND group_name = %s AND lease_owner = %s AND status = %s "
        "AND batch_id IS NULL"
    )
    params = [Status.SUCCESS, adapt(now), topic, group, owner, Status.RUNNING]
    with connection.cursor() as cursor:
        cursor.execute(update + " AND attempt = 1 AND pulled_at IS NOT NULL", params)
        first = cursor.rowcount
        if first == len(ids):
            return first
        cursor.execute(update, params)
        later = cursor.rowcount
        if later:
            cursor.execute(
                f"INSERT INTO mq_message_trace (message_id, event, actor, at, attempt, {connection.ops.quote_name('rank')}, "  # noqa: S608 - integers and placeholders only
                f"total, status_after, log) SELECT id, %s, %s, %s, attempt, NULL, NULL, %s, '' FROM mq_message WHERE id IN ({_id_list(ids)}) "
                "AND status = %s AND lease_owner = %s AND update_time = %s AND NOT (attempt = 1 AND pulled_at IS NOT NULL)",
                [TraceEvent.ACKED, owner[:200], adapt(now), Status.SUCCESS, Status.SUCCESS, owner, adapt(now)],
            )
    return first + later


def succeeded_now(ids: Sequence[int], *, owner: str, now: datetime) -> set[int]:
    """Of these messages, the ones `succeed_held(..., owner, now)` changed."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id FROM mq_message WHERE id IN ({_id_list(ids)}) AND status = %s AND lease_owner = %s "  # noqa: S608 - integers and placeholders only
            "AND update_time = %s",
            [Status.SUCCESS, owner, connection.ops.adapt_datetimefield_value(now)],
        )
        return {row[0] for row in cursor.fetchall()}


def lease_many(
    leases: Sequence[tuple[int, str, tuple[int | None, int | None], datetime]], now: datetime
) -> int:
    """`lease` for rows going to different owners (id, owner, rank, lease expiry) in one
    UPDATE: each column a CASE on the id. Conditional on status = NEW; returns how many
    rows changed."""
    if not leases:
        return 0
    adapt = connection.ops.adapt_datetimefield_value
    columns: dict[str, list[Any]] = {"lease_owner": [], "pulled_rank": [], "pulled_total": [], "lease_expires_at": []}
    for id_, owner, rank, expires in leases:
        columns["lease_owner"] += (int(id_), owner)
        columns["pulled_rank"] += (int(id_), rank[0])
        columns["pulled_total"] += (int(id_), rank[1])
        columns["lease_expires_at"] += (int(id_), adapt(expires))
    cases = ", ".join(f"{name} = CASE id{' WHEN %s THEN %s' * len(leases)} END" for name in columns)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE mq_message SET status = %s, {cases}, attempt = attempt + 1, update_time = %s, pulled_at = %s "  # noqa: S608 - integers and placeholders only
            f"WHERE id IN ({_id_list(i for i, _, _, _ in leases)}) AND status = %s",
            [Status.RUNNING, *(v for values in columns.values() for v in values), adapt(now), adapt(now), Status.NEW],
        )
        return cursor.rowcount
