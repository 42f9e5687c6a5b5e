"""Reads for the console's view of a topic's groups (its subscriptions): each group's state,
and the groups nobody consumes while their backlog grows."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone

from messages.models import Message, Status
from messages.subscriptions import group_status
from mqcenter.core.auth import Principal
from registry.models import ConsumerInstance
from registry.services import online_cutoff
from topics.models import Topic, TopicGroup

# A group with a growing backlog that no consumer has pulled from for this long is flagged.
UNATTENDED_AFTER = timedelta(days=1)
# The dashboard looks at no more candidates than this (each costs one indexed read).
UNATTENDED_SCAN_LIMIT = 200


def group_rows(*, topic: Topic, name: str | None = None) -> list[dict[str, Any]]:
    """Every group of `topic` (or the one called `name`) with its `group_status` and an
    `unattended` flag: the counts of one group's own rows each (the claim index), never a
    count over the whole table."""
    now = timezone.now()
    groups = topic.groups.all() if name is None else topic.groups.filter(name=name)
    rows = []
    for group in groups:
        status = group_status(topic=topic, group=group)
        status["unattended"] = group_unattended(
            group=group, consumers_online=status["consumers_online"], now=now
        )
        rows.append(status)
    return rows


def group_unattended(
    *, group: TopicGroup, consumers_online: int, now: datetime | None = None
) -> bool:
    """No consumer online, none has pulled for UNATTENDED_AFTER (a group never pulled counts
    from its creation), and messages kept becoming deliverable to it over that time."""
    now = now or timezone.now()
    since = now - UNATTENDED_AFTER
    if consumers_online or (group.last_pull_at or group.created_at) > since:
        return False
    return _backlog_grew(group.topic.name, group.name, since=since, now=now)


def groups_unattended(*, principal: Principal) -> list[TopicGroup]:
    """The principal's unattended groups (see `group_unattended`), for the dashboard. Looks
    at the UNATTENDED_SCAN_LIMIT longest-idle candidates at most."""
    now = timezone.now()
    since = now - UNATTENDED_AFTER
    candidates = TopicGroup.objects.select_related("topic").filter(
        Q(last_pull_at__lt=since) | Q(last_pull_at__isnull=True, created_at__lt=since)
    )
    if principal.biz_ids is not None:
        candidates = candidates.filter(topic__biz_id__in=principal.biz_ids)
    online = set(
        ConsumerInstance.objects.filter(last_heartbeat__gte=online_cutoff(now))
        .values_list("topic", "group_name")
        .distinct()
    )
    found = []
    for group in candidates.order_by("last_pull_at", "created_at")[:UNATTENDED_SCAN_LIMIT]:
        if (group.topic.name, group.name) not in online and _backlog_grew(
            group.topic.name, group.name, since=since, now=now
        ):
            found.append(group)
    return found


def _backlog_grew(topic: str, group: str, *, since: datetime, now: datetime) -> bool:
    # A range read on ix_msg_claim (topic, group, status, effect_time) that stops at one row.
    return Message.objects.filter(
        topic=topic,
        group_name=group,
        status=Status.NEW,
        effect_time__gte=since,
        effect_time__lte=now,
    ).exists()
