"""Trace rows: every state change leaves one, in the same transaction, but for the ones a
message's own row holds (`row_events`)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, NamedTuple

from messages.models import MessageTrace, Status, TraceEvent

LOG_LIMIT = 4000


class TraceRow(NamedTuple):
    """A trace row to insert (fields named as `MessageTrace`'s): a hot-path batch writes
    hundreds, and a tuple costs a tenth of a model instance."""

    message_id: int
    event: str
    actor: str
    at: datetime
    attempt: int
    rank: int | None
    total: int | None
    status_after: str
    log: str


def trace_row(
    message: Any,
    event: str,
    *,
    at: datetime,
    actor: str = "",
    log: str = "",
    rank: int | None = None,
    total: int | None = None,
) -> TraceRow:
    """The event `event` of `message` (anything with id, attempt and status)."""
    return TraceRow(
        message.id, event, actor[:200], at, message.attempt, rank, total, message.status, (log or "")[:LOG_LIMIT]
    )


def trace_write(rows: Iterable[TraceRow]) -> None:
    from messages.delivery.sql import insert_values

    insert_values(MessageTrace, list(rows), return_ids=False)


def row_pull(message: Any) -> TraceRow:
    """The "pulled" event the row of a claimed message holds (`Message.pulled_at`), as a trace
    row: by its lease owner, in its current attempt."""
    return TraceRow(message.id, TraceEvent.PULLED, message.lease_owner or "", message.pulled_at, message.attempt,
                    message.pulled_rank, message.pulled_total, Status.RUNNING, "")


def row_pulls_write(messages: Iterable[Any]) -> None:
    """Write out the pulls these rows hold, before a change of their lease owner or attempt
    (a new claim, a release) would lose them. The rows' `pulled_*` must then be cleared or
    overwritten in the same transaction."""
    trace_write(row_pull(m) for m in messages if m.pulled_at is not None)


def row_events(message: Any) -> list[MessageTrace]:
    """The events a message's row holds, which no trace row does: "produced" (its producer
    and add time) and the pull of the delivery it is leased for (`row_pull`). Unsaved (no
    id)."""
    events = [MessageTrace(message_id=message.id, event=TraceEvent.PRODUCED, actor=message.producer,
                           at=message.add_time, attempt=0, status_after=Status.NEW)]
    if message.pulled_at is not None:
        events.append(MessageTrace(**row_pull(message)._asdict()))
    return events
