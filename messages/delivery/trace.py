"""Trace rows: every state change leaves one, in the same transaction, but for the ones a
message's own row holds (`row_events`): its "produced" event, the pull of its current
delivery and, for a success on its first delivery, that "acked" event (`holds_ack`).

A success is the last change of most messages, and most succeed on their first delivery:
its row (SUCCESS, attempt 1, the consumer in `lease_owner`, the ack's time in
`update_time`) already says what an "acked" row would, so none is written. A change that
overwrites such a row (an edit, a requeue) writes the pull and the ack out first
(`row_acks_write`); the stats flush counts these successes from the rows
(messages/stats/row_acks.py)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, NamedTuple

from messages.models import MessageTrace, Status, TraceEvent
from messages.stats.row_acks import acks_written_out

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
    from messages.delivery.sql_insert import insert_values

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


def holds_ack(message: Any) -> bool:
    """Whether the row holds its "acked" event: SUCCESS on attempt 1 with its pull still on
    the row, which is a first delivery's success without a log. A later attempt's success
    writes its trace row; so does one with a log, which also writes its pull out and clears
    `pulled_at` (`lifecycle.succeed`), as a change that overwrites the row does
    (`row_acks_write`)."""
    return message.status == Status.SUCCESS and message.attempt == 1 and message.pulled_at is not None


def row_ack(message: Any) -> TraceRow:
    """The "acked" event a row that `holds_ack` holds, as the ack would have written it."""
    return TraceRow(message.id, TraceEvent.ACKED, message.lease_owner or "", message.update_time, message.attempt,
                    None, None, Status.SUCCESS, "")


def row_acks_write(messages: Iterable[Any]) -> None:
    """Write out the pull and the ack of the rows that hold their ack (locked by the
    caller), before a change of their status or `update_time` would lose them; their
    `pulled_*` are cleared here in memory and must be saved in the same transaction. The
    stats flush never counts a written-out ack: the ones it has not counted yet are
    counted here. An ack written before rows held acks has its trace row already
    (`acked_by_trace`): only its pull is written out."""
    held = [m for m in messages if holds_ack(m)]
    if not held:
        return
    traced = acked_by_trace([m.id for m in held])
    untraced = [m for m in held if m.id not in traced]
    acks_written_out(untraced)
    trace_write([*(row_pull(m) for m in held), *(row_ack(m) for m in untraced)])
    for message in held:
        message.pulled_at = message.pulled_rank = message.pulled_total = None


def acked_by_trace(ids: list[int]) -> set[int]:
    """Of these messages, those whose first delivery's ack has a trace row: written by the
    ack before rows held acks (the rows of those still look as if they held it)."""
    return set(MessageTrace.objects.filter(message_id__in=ids, event=TraceEvent.ACKED, attempt=1)
               .values_list("message_id", flat=True))


PULLED_FIELDS = ("pulled_at", "pulled_rank", "pulled_total")


def row_events(message: Any, stored: Iterable[Any] = ()) -> list[MessageTrace]:
    """The events a message's row holds, which no trace row does: "produced" (its producer
    and add time), the pull of the delivery it is leased for (`row_pull`) and that
    delivery's ack when it `holds_ack` and no trace row among `stored` (its trace) is that
    ack (`acked_by_trace`). Unsaved (no id)."""
    events = [MessageTrace(message_id=message.id, event=TraceEvent.PRODUCED, actor=message.producer,
                           at=message.add_time, attempt=0, status_after=Status.NEW)]
    if message.pulled_at is not None:
        events.append(MessageTrace(**row_pull(message)._asdict()))
    if holds_ack(message) and not any(e.event == TraceEvent.ACKED and e.attempt == 1 for e in stored):
        events.append(MessageTrace(**row_ack(message)._asdict()))
    return events
