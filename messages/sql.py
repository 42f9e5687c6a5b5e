"""The claim path's SQL, in one place.

On MySQL/MariaDB the optimizer may pick the shorter `(status, id)` index for a claim and
filesort the whole group's backlog; worse, on that plan MariaDB waits on locked rows instead
of skipping them. So the claim queries name their index. Other backends get the same query
from the ORM (PostgreSQL plans it well; SQLite takes no row locks and serializes writers).
"""

from __future__ import annotations

from datetime import datetime

from django.db import connection

from messages.models import Message, Status

MESSAGE_COLUMNS = ", ".join(f"`{f.column}`" for f in Message._meta.concrete_fields)


def is_mysql() -> bool:
    return connection.vendor == "mysql"


def claimable_rows(topic: str, group: str, now: datetime, limit: int, *, lock: bool) -> list[Message]:
    """Deliverable NEW rows of a group in (effect_time, id) order, along `ix_msg_claim`.

    With `lock`, taken FOR UPDATE SKIP LOCKED: rows another claimer holds are skipped.
    """
    if is_mysql():
        suffix = " FOR UPDATE SKIP LOCKED" if lock else ""
        return list(
            Message.objects.raw(
                f"SELECT {MESSAGE_COLUMNS} FROM mq_message FORCE INDEX (ix_msg_claim) "  # noqa: S608 - columns from the model
                "WHERE topic = %s AND group_name = %s AND status = %s AND effect_time <= %s "
                f"ORDER BY effect_time, id LIMIT %s{suffix}",
                [topic, group, Status.NEW, now, limit],
            )
        )
    rows = Message.objects.filter(topic=topic, group_name=group, status=Status.NEW, effect_time__lte=now)
    if lock:
        rows = rows.select_for_update(skip_locked=True)
    return list(rows.order_by("effect_time", "id")[:limit])


def next_due(topic: str, group: str, now: datetime) -> datetime | None:
    """When the group's next delayed message comes due (one probe of `ix_msg_claim`)."""
    if is_mysql():
        rows = list(
            Message.objects.raw(
                "SELECT id, effect_time FROM mq_message FORCE INDEX (ix_msg_claim) "
                "WHERE topic = %s AND group_name = %s AND status = %s AND effect_time > %s "
                "ORDER BY effect_time LIMIT 1",
                [topic, group, Status.NEW, now],
            )
        )
        return rows[0].effect_time if rows else None
    return (
        Message.objects.filter(topic=topic, group_name=group, status=Status.NEW, effect_time__gt=now)
        .order_by("effect_time")
        .values_list("effect_time", flat=True)
        .first()
    )


def group_head(topic: str, group: str, status: str) -> Message | None:
    """The lowest-id message of a group in a status, along `ix_msg_order`: the primary key
    would read the group's whole finished history first."""
    if is_mysql():
        rows = list(
            Message.objects.raw(
                f"SELECT {MESSAGE_COLUMNS} FROM mq_message FORCE INDEX (ix_msg_order) "  # noqa: S608 - columns from the model
                "WHERE topic = %s AND group_name = %s AND status = %s ORDER BY id LIMIT 1",
                [topic, group, status],
            )
        )
        return rows[0] if rows else None
    return Message.objects.filter(topic=topic, group_name=group, status=status).order_by("id").first()
