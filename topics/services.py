"""Business lines, topics, groups and tokens: every write and rule about them."""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.conf import settings as django_settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from mqcenter.core.audit import audit_record
from mqcenter.core.auth import Principal, token_cache, token_generate, validate_scope
from mqcenter.core.errors import Conflict, InvalidRequest, NotFound
from registry.wakeups import wakeup_hub
from topics.cache import topic_cache
from topics.locks import lock_topic
from topics.models import ApiToken, Biz, DeliveryMode, Topic, TopicGroup
from topics.webhooks import webhook_url_masked, webhooks_validate

DEFAULT_GROUP = "default"
TOPIC_FIELDS = (
    "owner",
    "description",
    "retry_count",
    "retry_strategy",
    "retry_interval_seconds",
    "timeout_seconds",
    "retention_days",
    "alarm_emails",
    "alarm_webhooks",
    "backlog_alarm_threshold",
    "max_backlog",
    "overflow",
    "default_ttl_seconds",
    "paused",
    "check_give_up",
)


# --- business lines ----------------------------------------------------------------------


def biz_create(*, actor: str, name: str, title: str = "", description: str = "") -> Biz:
    """Create a business line; a taken name is a conflict, not a crash."""
    try:
        with transaction.atomic():
            biz = Biz.objects.create(name=name, title=title, description=description)
            audit_record(actor=actor, action="biz.create", target=biz, after=biz_snapshot(biz))
    except IntegrityError as exc:
        raise Conflict(f"Business line {name!r} already exists.", details={"field": "name"}) from exc
    return biz


def biz_update(*, actor: str, biz: Biz, changes: dict[str, Any]) -> Biz:
    before = biz_snapshot(biz)
    for field in ("title", "description"):
        if field in changes:
            setattr(biz, field, changes[field])
    with transaction.atomic():
        biz.save()
        audit_record(actor=actor, action="biz.update", target=biz, before=before, after=biz_snapshot(biz))
    return biz


def biz_delete(*, actor: str, biz: Biz) -> None:
    """Delete a business line that owns no topics (topics must be moved or deleted first,
    and their purge finished)."""
    if Topic.all_objects.filter(biz=biz).exists():
        raise Conflict(f"Business line {biz.name!r} still owns topics.")
    with transaction.atomic():
        audit_record(actor=actor, action="biz.delete", target=biz, before=biz_snapshot(biz))
        biz.delete()


def biz_snapshot(biz: Biz) -> dict[str, Any]:
    return {"name": biz.name, "title": biz.title, "description": biz.description}


# --- topics ------------------------------------------------------------------------------


def topic_create(
    *, actor: str, name: str, biz: Biz | None, settings: dict[str, Any], groups: list[dict[str, str]] | None = None
) -> Topic:
    """Create a topic with its settings and declared groups."""
    settings = _settings_checked(settings, biz=biz)
    try:
        with transaction.atomic():
            topic = Topic(name=name, biz=biz)
            for field in TOPIC_FIELDS:
                if field in settings:
                    setattr(topic, field, settings[field])
            topic.save()
            for group in groups or []:
                TopicGroup.objects.create(topic=topic, name=group["group"], mode=group.get("mode", DeliveryMode.QUEUE))
            audit_record(actor=actor, action="topic.create", target=topic, after=_audited(topic_snapshot(topic)))
    except IntegrityError as exc:
        topic_require_not_deleting(name)
        raise Conflict(f"Topic {name!r} already exists.", details={"field": "topic"}) from exc
    return topic


def topic_is_deleting(name: str) -> bool:
    """Whether a deleted topic of this name is still being purged."""
    return Topic.all_objects.filter(name=name, deleting_at__isnull=False).exists()


def topic_require_not_deleting(name: str) -> None:
    """Raise Conflict while a deleted topic of this name is still being purged: the name is
    free only once nothing of the old topic is left (messages/operations/purge.py)."""
    if topic_is_deleting(name):
        raise Conflict(
            f"Topic {name!r} is being deleted; its name is free once the purge finishes.",
            details={"field": "topic", "topic": name},
        )


def topic_update(
    *, actor: str, topic: Topic, settings: dict[str, Any], biz: Biz | None = None,
    groups: list[dict[str, str]] | None = None,
) -> Topic:
    """Change topic settings; listed groups are added or have their mode changed.

    Groups not listed are kept: messages and consumers may still name them.
    """
    owner = biz if biz is not None else topic.biz
    if biz is not None and biz.id != topic.biz_id and "alarm_webhooks" not in settings and topic.alarm_webhooks:
        # A topic moving to another line keeps its targets only if that line may call them.
        settings = {**settings, "alarm_webhooks": topic.alarm_webhooks}
    settings = _settings_checked(settings, biz=owner, saved=topic.alarm_webhooks)
    before = topic_snapshot(topic)
    with transaction.atomic():
        for field in TOPIC_FIELDS:
            if field in settings:
                setattr(topic, field, settings[field])
        if biz is not None:
            topic.biz = biz
        topic.save()
        if groups:
            lock_topic(topic.pk, share=False)  # added groups subscribe from now (topics/locks.py)
        for group in groups or []:
            TopicGroup.objects.update_or_create(
                topic=topic, name=group["group"],
                defaults={"mode": group.get("mode", DeliveryMode.QUEUE), "subscribed": True},
            )
        after = topic_snapshot(topic)
        audit_record(actor=actor, action="topic.update", target=topic, before=_audited(before), after=_audited(after))
        if before["paused"] and not topic.paused:  # waiting pulls need not wait out their fallback
            pairs = [(topic.name, group["group"]) for group in after["groups"]]
            transaction.on_commit(lambda: wakeup_hub().publish(pairs))
    return topic


def _settings_checked(settings: dict[str, Any], *, biz: Biz | None, saved: list[dict[str, str]] | None = None) -> dict[str, Any]:
    # Webhook targets are checked here, whichever door they came through: the broker only
    # ever calls hosts the operator allowed the topic's business line. A target kept keeps
    # its signing secret.
    if "alarm_webhooks" in settings:
        targets = webhooks_validate(targets=settings["alarm_webhooks"], biz=biz.name if biz is not None else None,
                                    saved=saved)
        return {**settings, "alarm_webhooks": targets}
    return settings


def topic_require_drained(*, topic: Topic) -> None:
    """Raise Conflict while the topic still has live (NEW or RUNNING) messages."""
    from messages.models import Message, Status

    if Message.objects.filter(topic=topic.name, status__in=[Status.NEW, Status.RUNNING]).exists():
        raise Conflict(f"Topic {topic.name!r} still has live messages; drain or delete them first.")


def topic_delete(*, actor: str, topic: Topic) -> None:
    """Mark the topic deleted: gone for every reader, its name held until its purge job
    removes the row (`messages.operations.purge.topic_remove` calls this under the topic's
    exclusive lock, after `topic_require_drained`)."""
    with transaction.atomic():
        audit_record(actor=actor, action="topic.delete", target=topic, before=_audited(topic_snapshot(topic)))
        topic.deleting_at = timezone.now()
        topic.save(update_fields=["deleting_at"])


def topic_snapshot(topic: Topic, *, secrets: bool = True) -> dict[str, Any]:
    """The topic's settings. Without `secrets`, webhook URLs are masked (the secrets chat
    tools put in their path and query): what anyone but the topic's admins is shown."""
    data = {field: getattr(topic, field) for field in TOPIC_FIELDS}
    data["biz"] = topic.biz.name if topic.biz_id else None
    data["groups"] = [{"group": g.name, "mode": g.mode} for g in topic.groups.all()]
    return data if secrets else _audited(data)


def _audited(snapshot: dict[str, Any]) -> dict[str, Any]:
    """A topic's settings as the audit log keeps them: webhook URLs masked, signing secrets
    left out."""
    hooks = snapshot.get("alarm_webhooks") or []
    return {**snapshot, "alarm_webhooks": [{"url": webhook_url_masked(h["url"]), "format": h.get("format", "generic")}
                                           for h in hooks]}


def topics_for_produce(*, principal: Principal, names: Iterable[str], auto_create: bool) -> dict[str, Topic]:
    """The topics a produce call names (from the topic cache, with their `group_rows`),
    created with defaults when allowed.

    Checks that the token's business line owns each topic. Two producers may auto-create
    the same topic at once: the loser of the insert race reads the winner's row.
    """
    wanted = set(names)
    topics = topic_cache.get_many(wanted)
    missing = wanted - topics.keys()
    if missing and not auto_create:
        name = sorted(missing)[0]
        raise NotFound(f"Topic {name!r} does not exist.", details={"topic": name})
    for name in sorted(missing):
        try:
            with transaction.atomic():
                Topic.objects.create(name=name, biz_id=principal.home_biz_id)
        except IntegrityError:
            pass  # another producer created it first
    if missing:
        topics.update(topic_cache.get_many(missing))
        for name in sorted(missing - topics.keys()):
            topic_require_not_deleting(name)
    for topic in topics.values():
        topic_require_biz(principal, topic)
    return topics


def topic_require_biz(principal: Principal, topic: Topic) -> None:
    """Raise the NotFound of a missing topic unless `principal` reaches the topic's line:
    another line's topic answers exactly as a topic that does not exist."""
    if not principal.may_biz(topic.biz_id):
        raise topic_missing(topic.name)


def topic_missing(name: str) -> NotFound:
    """The one answer for a topic the caller cannot see, missing or another line's."""
    return NotFound(f"Topic {name!r} does not exist.", details={"topic": name})


def topic_get(name: str) -> Topic:
    try:
        return Topic.objects.get(name=name)
    except Topic.DoesNotExist as exc:
        raise topic_missing(name) from exc


def group_subscribe(*, topic: Topic, name: str) -> TopicGroup:
    """The group a consumer names, subscribed from `latest` the first time (with
    MQ_AUTO_CREATE_GROUPS; NotFound for a group that does not exist when groups are not
    created on demand, and a group only addressed by name stays unsubscribed then).

    Subscribed under the topic's exclusive lock, as every group is (topics/locks.py)."""
    group = TopicGroup.objects.filter(topic=topic, name=name).first()
    if group is not None and (group.subscribed or not django_settings.MQ_AUTO_CREATE_GROUPS):
        return group
    if group is None and not django_settings.MQ_AUTO_CREATE_GROUPS:
        raise NotFound(f"Group {name!r} of topic {topic.name!r} does not exist.", details={"group": name})
    try:
        with transaction.atomic():
            lock_topic(topic.pk, share=False)
            group, created = TopicGroup.objects.get_or_create(topic=topic, name=name)
            if not created and not group.subscribed:
                group.subscribed = True
                group.save(update_fields=["subscribed"])
            return group
    except IntegrityError:  # another request added it first
        return TopicGroup.objects.get(topic=topic, name=name)


def groups_address(*, topic: Topic, names: Iterable[str], required: bool = True) -> None:
    """The groups messages are sent to by name (point-to-point, a move, a redrive, or `default`
    keeping a topic's publishes while nobody subscribes): a row each, so that their backlog is
    counted, but not subscribed (publishes do not copy to them; only a consumer or an operator
    subscribes a group). A group not yet known is added when groups are created on demand or
    `required` is off, else NotFound (before anything is written). An unsubscribed row changes
    no publish, so no topic lock is taken."""
    rows = getattr(topic, "group_rows", None)
    unknown = set(names) - (rows.keys() if rows is not None else set())
    if not unknown:
        return
    for group in TopicGroup.objects.filter(topic=topic, name__in=unknown):  # cached before the group
        unknown.discard(group.name)
        if rows is not None:
            rows[group.name] = group
    if unknown and required and not django_settings.MQ_AUTO_CREATE_GROUPS:
        name = min(unknown)
        raise NotFound(f"Group {name!r} of topic {topic.name!r} does not exist.", details={"group": name})
    for name in sorted(unknown):
        try:
            with transaction.atomic():
                group, _ = TopicGroup.objects.get_or_create(topic=topic, name=name, defaults={"subscribed": False})
        except IntegrityError:  # another request added it first
            group = TopicGroup.objects.get(topic=topic, name=name)
        if rows is not None:
            group.topic = topic
            rows[name] = group


# Per process, when each group's `last_pull_at` was last written: at most every few seconds.
_PULL_SEEN_SECONDS = 5.0
_pull_seen: dict[int, float] = {}


def group_pull_record(group: TopicGroup, now: datetime) -> None:
    """Note that the group was pulled from (for "last pull" on its page), at most every few
    seconds per broker process: a pull should not write the group's row each time."""
    tick = time.monotonic()
    if tick - _pull_seen.get(group.pk, float("-inf")) < _PULL_SEEN_SECONDS:
        return
    _pull_seen[group.pk] = tick
    TopicGroup.objects.filter(pk=group.pk).update(last_pull_at=now)


# --- tokens ------------------------------------------------------------------------------


def token_create(
    *, actor: str, scopes: list[str], biz: Biz | None = None, name: str = "", created_by: Any = None
) -> tuple[str, ApiToken]:
    """Issue a token. Returns the secret (shown once, never stored) and the row."""
    try:
        clean = [validate_scope(s) for s in scopes]
    except ValueError as exc:
        raise InvalidRequest(str(exc), details={"field": "scopes"}) from exc
    if not clean:
        raise InvalidRequest("A token needs at least one scope.", details={"field": "scopes"})
    token, prefix, digest = token_generate()
    with transaction.atomic():
        row = ApiToken.objects.create(
            name=name, biz=biz, prefix=prefix, token_hash=digest, scopes=clean, created_by=created_by
        )
        audit_record(
            actor=actor, action="token.create", target=row,
            after={"name": name, "biz": biz.name if biz else None, "scopes": clean, "prefix": prefix},
        )
    return token, row


def token_revoke(*, actor: str, token: ApiToken) -> None:
    with transaction.atomic():
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        audit_record(actor=actor, action="token.revoke", target=token, before={"prefix": token.prefix})
    token_cache.clear()
