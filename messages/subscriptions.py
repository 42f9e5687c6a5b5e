"""Subscriptions: a topic's groups, created (from `latest`, `earliest` or a time), changed
(mode, pause, flow limits) and deleted. REST, the console, the SDK's CLI and management
commands call these.

Creating or deleting a group holds its topic's row exclusively while it changes the group
rows (`topics.locks.lock_topic`): publishes hold it shared while they copy to the groups, so each
publish is copied to a group either by the produce or by the group's replay, never both
and never neither (messages/operations/replay.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Max
from django.utils import timezone

from messages.archive.models import MessageArchive
from messages.delivery.claims.gate import bucket_size
from messages.models import DEAD_STATUSES, Message, Status
from messages.operations.models import BulkJob
from messages.operations.replay import replay_batch, replay_estimate, replay_run_key
from mqcenter.celery import app as celery_app
from mqcenter.core.audit import audit_record
from mqcenter.core.auth import Principal
from mqcenter.core.dates import parse_iso_datetime
from mqcenter.core.errors import Conflict, InvalidRequest, NotFound
from registry.wakeups import wakeup_hub
from topics.locks import lock_topic
from topics.models import DeliveryMode, Topic, TopicGroup
from topics.services import topic_require_biz

MIN_RATE = 0.01  # one delivery every 100 s: a slower rate is a pause
MAX_RATE = 100_000.0
GROUP_SETTINGS = ("mode", "paused", "max_in_flight", "rate_per_second", "key_concurrency")
DELETE_BATCH = 1000


def group_get(*, principal: Principal, topic: Topic, name: str) -> TopicGroup:
    """The group of a topic the principal's business line owns; NotFound otherwise."""
    topic_require_biz(principal, topic)
    group = TopicGroup.objects.filter(topic=topic, name=name).first()
    if group is None:
        raise NotFound(f"Group {name!r} of topic {topic.name!r} does not exist.", details={"group": name})
    return group


def start_parse(value: Any, *, field: str = "start") -> str | datetime:
    """A group's `start`: "latest", "earliest" or a time not in the future (400 otherwise)."""
    if value in (None, "latest"):
        return "latest"
    if value == "earliest":
        return "earliest"
    moment = parse_iso_datetime(value)
    if moment is None or moment.tzinfo is None:
        raise InvalidRequest(f'{field} must be "latest", "earliest" or an ISO 8601 time with offset.',
                             details={"field": field})
    if moment > timezone.now():
        raise InvalidRequest(f"{field} must not be in the future.", details={"field": field})
    return moment


def group_create(
    *, principal: Principal, topic: Topic, name: str, mode: str = DeliveryMode.QUEUE,
    start: str | datetime = "latest", limits: dict[str, Any] | None = None,
) -> tuple[TopicGroup, int | None]:
    """Subscribe a new group to `topic`. From `earliest` or a time, the topic's retained
    publishes since then are replayed into it: at once when few, else as a job.
    Returns the group and the replay job's id (None when none was needed)."""
    topic_require_biz(principal, topic)
    settings_in = _validated({"mode": mode, **(limits or {})})
    with transaction.atomic():
        lock_topic(topic.pk, share=False)
        # A group messages were only sent to by name is subscribed now, keeping its messages.
        group = TopicGroup.objects.filter(topic=topic, name=name).first() or TopicGroup(topic=topic, name=name)
        if group.pk is not None and group.subscribed:
            raise Conflict(f"Group {name!r} of topic {topic.name!r} already exists.", details={"field": "group"})
        group.subscribed = True
        for field, value in settings_in.items():
            setattr(group, field, value)
        if group.rate_per_second is not None:
            group.rate_tokens, group.rate_refilled_at = bucket_size(group.rate_per_second), timezone.now()
        group.save()
        # Every publish up to here is committed (we hold the topic's lock); later ones copy
        # to this group themselves.
        high_water = _high_water()
        audit_record(actor=principal.name, action="group.create", target=group, target_name=f"{topic.name}/{name}",
                     after={**_names(topic, name), "mode": group.mode, "start": str(start), **_limits(group)})
    if start == "latest":
        return group, None
    return group, _replay(principal, topic, name, start if isinstance(start, datetime) else None, high_water)


def group_replay(*, principal: Principal, topic: Topic, name: str, since: datetime) -> int | None:
    """Replay the topic's publishes since `since` into an existing group again (the group
    gets those messages a second time: an operator's deliberate re-processing). Returns the
    job id when large, else None."""
    group = group_get(principal=principal, topic=topic, name=name)
    with transaction.atomic():
        lock_topic(topic.pk, share=False)
        high_water = _high_water()
        audit_record(actor=principal.name, action="group.replay", target=group, target_name=f"{topic.name}/{name}",
                     after={**_names(topic, name), "since": since.isoformat()})
    return _replay(principal, topic, name, since, high_water)


def _high_water() -> int:
    """The highest message id stored, live or archived (a quiet topic's newest publishes may
    all be archived already). Read under the topic's exclusive lock: every publish up to it
    is committed."""
    live = Message.objects.aggregate(top=Max("id"))["top"] or 0
    return max(live, MessageArchive.objects.aggregate(top=Max("id"))["top"] or 0)


def _replay(principal: Principal, topic: Topic, group: str, since: datetime | None, high_water: int) -> int | None:
    """Copy the history up to `high_water` into the group: at once when small (returns None),
    else as a job (returns its id)."""
    if replay_estimate(topic=topic.name, since=since, high_water=high_water,
                       limit=settings.MQ_REDRIVE_SYNC_LIMIT) > settings.MQ_REDRIVE_SYNC_LIMIT:
        return _replay_job(principal, topic, group, since, high_water).id
    run = replay_run_key()
    after: int | None = 0
    while after is not None:
        _copied, after = replay_batch(topic=topic, group=group, since=since, high_water=high_water,
                                      after=after, actor=principal.name, run=run)
    return None


def _replay_job(principal: Principal, topic: Topic, group: str, since: datetime | None, high_water: int) -> BulkJob:
    with transaction.atomic():
        job = BulkJob.objects.create(
            kind=BulkJob.Kind.REPLAY, actor=principal.name,
            filter={"topic": topic.name, "group": group, "since": since.isoformat() if since else None,
                    "high_water": high_water},
            biz_ids=sorted(principal.biz_ids) if principal.biz_ids is not None else None,
            total=replay_estimate(topic=topic.name, since=since, high_water=high_water, limit=10**9),
        )
        transaction.on_commit(lambda: celery_app.send_task("messages.bulk_job", args=[job.id]))
    return job


def group_update(*, principal: Principal, topic: Topic, name: str, changes: dict[str, Any]) -> TopicGroup:
    """Change a group's mode, pause or flow limits (None lifts a limit)."""
    group = group_get(principal=principal, topic=topic, name=name)
    clean = _validated(changes)
    with transaction.atomic():
        # Locked and re-read: concurrent changes of other settings, and the claims' writes
        # of the rate bucket, are kept.
        group = TopicGroup.objects.select_for_update().get(pk=group.pk)
        before = {"mode": group.mode, **_limits(group)}
        for field, value in clean.items():
            setattr(group, field, value)
        fields = list(clean)
        if "rate_per_second" in clean and group.rate_per_second is not None:
            group.rate_tokens, group.rate_refilled_at = bucket_size(group.rate_per_second), timezone.now()
            fields += ["rate_tokens", "rate_refilled_at"]
        group.save(update_fields=fields)
        audit_record(actor=principal.name, action="group.update", target=group, target_name=f"{topic.name}/{name}",
                     before=before, after={**_names(topic, name), "mode": group.mode, **_limits(group)})
        # A resumed or widened group's waiting pulls need not wait out their fallback.
        transaction.on_commit(lambda: wakeup_hub().publish([(topic.name, name)]))
    return group


def group_delete(*, principal: Principal, topic: Topic, name: str) -> int:
    """Unsubscribe: later publishes no longer copy to the group, and its NEW messages are
    removed (finished ones age out with retention; running ones finish or expire).
    Returns how many messages were removed.

    Only messages stored before the delete are removed: a consumer still running re-creates
    the group (from `latest`) on its next pull when groups are created on demand, and what
    that group then gets is its own."""
    group = group_get(principal=principal, topic=topic, name=name)
    with transaction.atomic():
        lock_topic(topic.pk, share=False)
        audit_record(actor=principal.name, action="group.delete", target=group, target_name=f"{topic.name}/{name}",
                     before={**_names(topic, name), "mode": group.mode, **_limits(group)})
        group.delete()
        high_water = Message.objects.aggregate(top=Max("id"))["top"] or 0
    removed = 0
    while True:  # bounded batches: a big backlog never holds one long transaction
        ids = list(Message.objects.filter(topic=topic.name, group_name=name, status=Status.NEW, id__lte=high_water)
                   .order_by("id").values_list("id", flat=True)[:DELETE_BATCH])
        if not ids:
            return removed
        removed += Message.objects.filter(id__in=ids, status=Status.NEW).delete()[0]


def group_status(*, topic: Topic, group: TopicGroup) -> dict[str, Any]:
    """What an operator asks of a group: its settings and how it is doing right now."""
    from registry.services import consumers_online_ids

    now = timezone.now()
    scope = Message.objects.filter(topic=topic.name, group_name=group.name)
    counts = dict(scope.filter(status__in=[Status.NEW, Status.RUNNING, *DEAD_STATUSES])
                  .values_list("status").annotate(n=Count("id")).values_list("status", "n"))
    oldest = scope.filter(status=Status.NEW, effect_time__lte=now).order_by("effect_time").values_list(
        "effect_time", flat=True).first()
    return {
        "topic": topic.name, "group": group.name, "subscribed": group.subscribed, "mode": group.mode, **_limits(group),
        "backlog": counts.get(Status.NEW, 0),
        "in_flight": counts.get(Status.RUNNING, 0),
        "dead": sum(counts.get(s, 0) for s in DEAD_STATUSES),
        "oldest_age_seconds": (now - oldest).total_seconds() if oldest else None,
        "consumers_online": len(consumers_online_ids(topic.name, group.name)),
        "last_pull_at": group.last_pull_at,
        "created_at": group.created_at,
    }


def _names(topic: Topic, name: str) -> dict[str, str]:
    """Who an audit entry is about: the entry's target is the group row (its type and id
    columns are short), the names go with its details."""
    return {"topic": topic.name, "group": name}


def _limits(group: TopicGroup) -> dict[str, Any]:
    return {"paused": group.paused, "max_in_flight": group.max_in_flight,
            "rate_per_second": group.rate_per_second, "key_concurrency": group.key_concurrency}


def _validated(changes: dict[str, Any]) -> dict[str, Any]:
    """Group settings checked one by one: 400 with the field, nothing changed."""
    clean: dict[str, Any] = {}
    for field, value in changes.items():
        if field not in GROUP_SETTINGS:
            raise InvalidRequest(f"{field} is not a setting of a group.", details={"field": field})
        if field == "mode":
            if value not in DeliveryMode.values:
                raise InvalidRequest(f"mode must be one of {', '.join(DeliveryMode.values)}.", details={"field": field})
        elif field == "paused":
            if not isinstance(value, bool):
                raise InvalidRequest("paused must be true or false.", details={"field": field})
        elif field == "rate_per_second":
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                                      or not MIN_RATE <= value <= MAX_RATE):
                raise InvalidRequest(f"rate_per_second must be from {MIN_RATE} to {MAX_RATE:,.0f}, or null.",
                                     details={"field": field})
            value = None if value is None else float(value)
        elif (value is not None or field == "key_concurrency") and (
            isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 2**31 - 1
        ):
            raise InvalidRequest(f"{field} must be an integer of at least 1.", details={"field": field})
        clean[field] = value
    return clean
