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
from messages.delivery.sql import oldest_due
from messages.delivery.trace import trace_row, trace_write
from messages.models import DEAD_STATUSES, Message, MessageTrace, Status, TraceEvent
from messages.operations.models import BulkJob
from messages.operations.replay import replay_batch, replay_estimate, replay_run_key
from messages.routing.filters import filter_parse, filtered_out, skipped_reset
from messages.stats.live import live_moved
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
GROUP_SETTINGS = ("mode", "paused", "max_in_flight", "rate_per_second", "key_concurrency", "fair_keys")
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
    start: str | datetime = "latest", limits: dict[str, Any] | None = None, filter: Any = None,
) -> tuple[TopicGroup, int | None]:
    """Subscribe a new group to `topic`, with an optional subscription filter (as the
    request gives it; messages/routing/filters.py checks it). From `earliest` or a time, the
    topic's retained publishes since then are replayed into it: at once when few, else as
    a job. Returns the group and the replay job's id (None when none was needed)."""
    topic_require_biz(principal, topic)
    settings_in = _validated({"mode": mode, **(limits or {})})
    spec = filter_parse(filter)
    with transaction.atomic():
        lock_topic(topic.pk, share=False)
        # A group messages were only sent to by name is subscribed now, keeping its messages.
        group = TopicGroup.objects.filter(topic=topic, name=name).first() or TopicGroup(topic=topic, name=name)
        if group.pk is not None and group.subscribed:
            raise Conflict(f"Group {name!r} of topic {topic.name!r} already exists.", details={"field": "group"})
        if group.pk is None:
            # Rows of the name without a group row are a deleted group's not yet ended: end
            # them first, so the new group sees none of them.
            _leftovers_end(topic, name, _high_water(), actor=principal.name)
        group.subscribed = True
        for field, value in settings_in.items():
            setattr(group, field, value)
        if group.rate_per_second is not None:
            group.rate_tokens, group.rate_refilled_at = bucket_size(group.rate_per_second), timezone.now()
        group.filter_spec, group.filter_set_at = spec, timezone.now() if spec is not None else None
        group.save()
        if spec is not None:
            skipped_reset(group.pk)
        # Every publish up to here is committed (we hold the topic's lock); later ones copy
        # to this group themselves.
        high_water = _high_water()
        audit_record(actor=principal.name, action="group.create", target=group, target_name=f"{topic.name}/{name}",
                     after={**_names(topic, name), "mode": group.mode, "start": str(start), **_limits(group),
                            **({"filter": spec} if spec is not None else {})})
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
    """Change a group's mode, pause, flow limits (None lifts a limit) or subscription filter
    (None removes it). A filter change takes the topic's exclusive lock: each publish is
    copied under the old filter or the new one, and the new one applies to every later
    publish; its `filtered_out` count starts again from zero. Setting the filter a group
    already has changes nothing (no write, no audit row)."""
    group = group_get(principal=principal, topic=topic, name=name)
    changes = dict(changes)
    new_filter = "filter" in changes
    spec = filter_parse(changes.pop("filter", None))
    clean = _validated(changes)
    with transaction.atomic():
        if new_filter:
            lock_topic(topic.pk, share=False)
        # Locked and re-read: concurrent changes of other settings, and the claims' writes
        # of the rate bucket, are kept.
        group = TopicGroup.objects.select_for_update().get(pk=group.pk)
        if new_filter and spec == group.filter_spec:
            # The filter it has: no change, so its set time and skipped count run on.
            new_filter = False
            if not clean:
                return group
        before = {"mode": group.mode, **_limits(group), **({"filter": group.filter_spec} if new_filter else {})}
        for field, value in clean.items():
            setattr(group, field, value)
        fields = list(clean)
        if new_filter:
            group.filter_spec, group.filter_set_at = spec, timezone.now() if spec is not None else None
            fields += ["filter_spec", "filter_set_at"]
            skipped_reset(group.pk)
        if "rate_per_second" in clean and group.rate_per_second is not None:
            group.rate_tokens, group.rate_refilled_at = bucket_size(group.rate_per_second), timezone.now()
            fields += ["rate_tokens", "rate_refilled_at"]
        group.save(update_fields=fields)
        audit_record(actor=principal.name, action="group.update", target=group, target_name=f"{topic.name}/{name}",
                     before=before, after={**_names(topic, name), "mode": group.mode, **_limits(group),
                                           **({"filter": spec} if new_filter else {})})
        # A resumed or widened group's waiting pulls need not wait out their fallback.
        transaction.on_commit(lambda: wakeup_hub().publish([(topic.name, name)]))
    return group


def group_delete(*, principal: Principal, topic: Topic, name: str) -> int:
    """Unsubscribe: later publishes no longer copy to the group, and nothing it held stays
    visible to a later group of the same name: its NEW messages are removed, and its running
    and dead ones end CANCELLED with a "cancelled" trace event (a consumer's late ack of one
    answers stale); its PREPARED ones are settled by their transaction's commit or rollback.
    Returns how many NEW messages were removed.

    Only messages stored before the delete are ended: a consumer still running re-creates
    the group (from `latest`) on its next pull when groups are created on demand, and what
    that group then gets is its own. A group re-created before the delete's batches are done
    ends the rest itself (`group_create`)."""
    group = group_get(principal=principal, topic=topic, name=name)
    with transaction.atomic():
        lock_topic(topic.pk, share=False)
        audit_record(actor=principal.name, action="group.delete", target=group, target_name=f"{topic.name}/{name}",
                     before={**_names(topic, name), "mode": group.mode, **_limits(group)})
        group.delete()
        high_water = Message.objects.aggregate(top=Max("id"))["top"] or 0
    return _leftovers_end(topic, name, high_water, actor=principal.name)


# What a deleted group leaves that a later group of its name could see: removed when NEW,
# else CANCELLED (its trace then says why). PREPARED copies stay: no group sees them, and
# their transaction's commit settles them against the groups subscribed then (deleted when
# their group is gone; messages/transactions/copies.py).
LEFTOVER_STATUSES = (Status.NEW, Status.RUNNING, *DEAD_STATUSES)


def _leftovers_end(topic: Topic, name: str, high_water: int, *, actor: str) -> int:
    """End the rows of group `name` stored up to `high_water` that a later group of the name
    would see, in bounded batches (a big backlog never holds one long transaction), each
    under its rows' locks (a claim's SKIP LOCKED passes over them; an ack waits and then
    finds the row no longer RUNNING). Returns how many NEW rows were removed."""
    removed = 0
    while True:
        with transaction.atomic():
            rows = list(Message.objects.select_for_update()
                        .filter(topic=topic.name, group_name=name, status__in=LEFTOVER_STATUSES, id__lte=high_water)
                        .order_by("id").only("id", "topic", "group_name", "status", "attempt")[:DELETE_BATCH])
            if not rows:
                return removed
            now = timezone.now()
            waiting = [m for m in rows if m.status == Status.NEW]
            ended = [m for m in rows if m.status != Status.NEW]
            live_moved((m.topic, m.group_name, m.status, None if m.status == Status.NEW else Status.CANCELLED)
                       for m in rows)
            if waiting:
                MessageTrace.objects.filter(message_id__in=[m.id for m in waiting]).delete()
                removed += Message.objects.filter(id__in=[m.id for m in waiting]).delete()[0]
            if ended:
                Message.objects.filter(id__in=[m.id for m in ended]).update(
                    status=Status.CANCELLED, lease_expires_at=None, update_time=now)
                for message in ended:
                    message.status = Status.CANCELLED
                trace_write(trace_row(m, TraceEvent.CANCELLED, at=now, actor=actor, log=f"group {name} deleted")
                            for m in ended)


def group_status(*, topic: Topic, group: TopicGroup) -> dict[str, Any]:
    """What an operator asks of a group: its settings and how it is doing right now."""
    from registry.services import consumers_online_ids

    now = timezone.now()
    scope = Message.objects.filter(topic=topic.name, group_name=group.name)
    counts = dict(scope.filter(status__in=[Status.NEW, Status.RUNNING, *DEAD_STATUSES])
                  .values_list("status").annotate(n=Count("id")).values_list("status", "n"))
    oldest = oldest_due(topic.name, group.name, now)
    return {
        "topic": topic.name, "group": group.name, "subscribed": group.subscribed, "mode": group.mode, **_limits(group),
        "backlog": counts.get(Status.NEW, 0),
        "in_flight": counts.get(Status.RUNNING, 0),
        "dead": sum(counts.get(s, 0) for s in DEAD_STATUSES),
        "oldest_age_seconds": (now - oldest).total_seconds() if oldest else None,
        "consumers_online": len(consumers_online_ids(topic.name, group.name)),
        "last_pull_at": group.last_pull_at,
        "created_at": group.created_at,
        "filter": group.filter_spec,
        "filter_set_at": group.filter_set_at,
        "filtered_out": filtered_out(group.pk) if group.filter_spec is not None else 0,
    }


def _names(topic: Topic, name: str) -> dict[str, str]:
    """Who an audit entry is about: the entry's target is the group row (its type and id
    columns are short), the names go with its details."""
    return {"topic": topic.name, "group": name}


def _limits(group: TopicGroup) -> dict[str, Any]:
    return {"paused": group.paused, "max_in_flight": group.max_in_flight,
            "rate_per_second": group.rate_per_second, "key_concurrency": group.key_concurrency,
            "fair_keys": group.fair_keys}


def group_settings_validated(changes: dict[str, Any]) -> dict[str, Any]:
    """Group settings checked one by one (400 with the field), as create and update check them."""
    return _validated(changes)


def group_settings_errors(changes: dict[str, Any]) -> dict[str, str]:
    """Every group setting's problem at once, keyed by field (a form shows them all)."""
    errors: dict[str, str] = {}
    for field, value in changes.items():
        try:
            _validated({field: value})
        except InvalidRequest as exc:
            errors[field] = exc.message
    return errors


def _validated(changes: dict[str, Any]) -> dict[str, Any]:
    """Group settings checked one by one: 400 with the field, nothing changed."""
    clean: dict[str, Any] = {}
    for field, value in changes.items():
        if field not in GROUP_SETTINGS:
            raise InvalidRequest(f"{field} is not a setting of a group.", details={"field": field})
        if field == "mode":
            if value not in DeliveryMode.values:
                raise InvalidRequest(f"mode must be one of {', '.join(DeliveryMode.values)}.", details={"field": field})
        elif field in ("paused", "fair_keys"):
            if not isinstance(value, bool):
                raise InvalidRequest(f"{field} must be true or false.", details={"field": field})
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
