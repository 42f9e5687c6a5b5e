"""Trace rows: every state change leaves one, in the same transaction."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from messages.models import Message, MessageTrace

LOG_LIMIT = 4000


def trace_row(
    message: Message,
    event: str,
    *,
    at: datetime,
    actor: str = "",
    log: str = "",
    rank: int | None = None,
    total: int | None = None,
) -> MessageTrace:
    return MessageTrace(
        message_id=message.id,
        event=event,
        actor=actor[:200],
        at=at,
        attempt=message.attempt,
        rank=rank,
        total=total,
        status_after=message.status,
        log=(log or "")[:LOG_LIMIT],
    )


def trace_write(rows: Iterable[MessageTrace]) -> None:
    from messages.sql import insert_rows

    insert_rows(MessageTrace, list(rows), return_ids=False)
