"""Reads for the console's alarm history."""

from __future__ import annotations

from typing import Any

from messages.alarms.models import Alarm
from mqcenter.core.auth import Principal
from topics.models import Topic


def alarms_recent(
    *, principal: Principal, topic: str | None = None, kind: str | None = None, limit: int = 50
) -> list[Any]:
    """The latest alarms (newest first, optionally of one kind) on topics the principal may see."""
    rows = Alarm.objects.all()
    if topic:
        rows = rows.filter(topic=topic)
    if kind:
        rows = rows.filter(kind=kind)
    if principal.biz_ids is not None:
        rows = rows.filter(topic__in=Topic.objects.filter(biz_id__in=principal.biz_ids).values("name"))
    return list(rows.order_by("-created_at", "-id")[: max(1, min(limit, 500))])
