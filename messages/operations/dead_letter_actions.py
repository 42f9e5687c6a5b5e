"""Whole dead-letter groups in one action: redrive, delete, export as JSON lines.

A group is (topic, group, normalised reason), as messages/operations/dead_letters.py defines it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from messages.filters import MessageFilter
from messages.models import DEAD_STATUSES, Message
from messages.operations.bulk import bulk_job_create, messages_delete, messages_requeue
from messages.operations.dead_letters import dead_letter_group_ids
from messages.operations.models import BulkJob
from mqcenter.core.auth import Principal

# A group of at most this many messages is handled in the request; a larger one becomes a
# BulkJob with a progress bar.
GROUP_SYNC_LIMIT = 500


def dead_letter_group_act(
    *, principal: Principal, action: str, topic: str, group: str, reason: str
) -> dict[str, Any]:
    """Redrive or delete one whole group. Up to GROUP_SYNC_LIMIT messages are handled at
    once ({"count": n}); a larger group becomes a BulkJob ({"job": id}) whose worker walks
    the group with `dead_letter_group_ids` batch by batch."""
    ids = dead_letter_group_ids(principal=principal, topic=topic, group=group, reason=reason,
                                limit=GROUP_SYNC_LIMIT + 1)
    if len(ids) > GROUP_SYNC_LIMIT:
        kind = BulkJob.Kind.REDRIVE if action == "redrive" else BulkJob.Kind.DELETE
        flt = MessageFilter(topic=topic, group=group, status=DEAD_STATUSES)
        job = bulk_job_create(principal=principal, kind=kind, filter=flt, reason=reason)
        return {"job": job.id}
    if not ids:
        return {"count": 0}
    described = {"topic": topic, "group": group, "status": list(DEAD_STATUSES), "reason": reason}
    if action == "redrive":
        return messages_requeue(principal=principal, ids=ids, described=described)
    return messages_delete(principal=principal, ids=ids, described=described)


def dead_letter_group_export(*, principal: Principal, topic: str, group: str, reason: str) -> Iterator[str]:
    """The group's messages as JSON lines (newest first), produced batch by batch so a
    large group streams without being held in memory."""
    cursor: int | None = None
    while True:
        ids = dead_letter_group_ids(principal=principal, topic=topic, group=group, reason=reason,
                                    before_id=cursor, limit=1000)
        if not ids:
            return
        for m in Message.objects.filter(id__in=ids).order_by("-id"):
            yield json.dumps({
                "id": m.id, "topic": m.topic, "group": m.group_name, "status": m.status, "key": m.key,
                "data": m.data, "headers": m.headers, "attempt": m.attempt, "last_log": m.last_log,
                "add_time": _iso(m.add_time), "update_time": _iso(m.update_time),
            }, ensure_ascii=False) + "\n"
        cursor = min(ids)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None
