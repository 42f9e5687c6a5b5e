"""Reads for the console's view of a topic's groups (its subscriptions): each group's state,
and the groups nobody consumes while their messages wait."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from messages.models import PRIORITY_LEVELS, Message, Status
from messages.subscriptions import group_status
from mqcenter.core.auth import Principal
from registry.models import ConsumerInstance
from registry.services import online_cutoff
from topics.models import Topic, TopicGroup
from topics.services import DEFAULT_GROUP

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
        # Publishes made while nobody subscribed wait here; a later subscriber does not take them.
        status["stranded"] = group.name == DEFAULT_GROUP and not group.subscribed and status["backlog"] > 0
        status["unattended"] = group_unattended(
            group=group, consumers_online=status["consumers_online"], now=now
        )
        rows.append(status)
    return rows


def _unattended_since(now: datetime) -> datetime:
    """A group is flagged once a message has waited, and no consumer has been seen, for
    MQ_ALARM_OLDEST_AGE_SECONDS (the age alarm's threshold)."""
    return now - timedelta(seconds=settings.MQ_ALARM_OLDEST_AGE_SECONDS)


def group_unattended(
    *, group: TopicGroup, consumers_online: int, now: datetime | None = None
) -> bool:
    """No consumer online, none has pulled for MQ_ALARM_OLDEST_AGE_SECONDS (a group never
    pulled counts from its creation), and a message has been deliverable to it for that long."""
    now = now or timezone.now()
    since = _unattended_since(now)
    if consumers_online or (group.last_pull_at or group.created_at) > since:
        return False
    return _waited(group.topic.name, group.name, since=since)


def groups_unattended(*, principal: Principal) -> list[TopicGroup]:
    """The principal's unattended groups (see `group_unattended`), for the dashboard. Looks
    at the UNATTENDED_SCAN_LIMIT longest-idle candidates at most."""
    now = timezone.now()
    since = _unattended_since(now)
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
        if (group.topic.name, group.name) not in online and _waited(group.topic.name, group.name, since=since):
            found.append(group)
    return found


def _waited(topic: str, group: str, *, since: datetime) -> bool:
    """A NEW message of the group has been due since `since` or earlier: a range read on
    ix_msg_priority (topic, group, status, priority, effect_time), one range per level, that
    stops at one row."""
    return Message.objects.filter(
        topic=topic, group_name=group, status=Status.NEW, priority__in=PRIORITY_LEVELS, effect_time__lte=since,
    ).exists()
