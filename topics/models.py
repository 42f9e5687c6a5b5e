"""Business lines, topics with their consumer groups, and API tokens."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$"
name_validator = RegexValidator(NAME_PATTERN, "Use letters, digits and _.:- (1-200 chars).")


class Biz(models.Model):
    """A business line: the unit that owns topics and tokens and scopes operators."""

    name = models.CharField(max_length=100, unique=True, validators=[name_validator])
    title = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "business lines"

    def __str__(self) -> str:
        return self.name


class CheckGiveUp(models.TextChoices):
    """What the check-back does with a transaction its producer never resolved, after
    MQ_TRANSACTION_GIVE_UP_SECONDS."""

    ROLLBACK = "rollback"
    COMMIT = "commit"


class RetryStrategy(models.TextChoices):
    FIXED = "fixed"
    LINEAR = "linear"
    EXPONENTIAL = "exponential"
    RANDOM = "random"


class Overflow(models.TextChoices):
    """What a produce does to a group at its topic's max_backlog (messages/overflow.py)."""

    REJECT = "reject"  # 429 backlog_full, nothing stored
    DROP_OLDEST = "drop_oldest"  # the oldest deliverable messages end EXPIRED to make room
    DEAD_LETTER_OLDEST = "dead_letter_oldest"  # the same, as API.md states both


class DeliveryMode(models.TextChoices):
    QUEUE = "queue"
    SERIAL = "serial"
    SHARDED = "sharded"


def default_retry_count() -> int:
    """A consumer that dies mid-message gets it redelivered unless the topic says otherwise."""
    return settings.MQ_DEFAULT_RETRY_COUNT


def subscriptions_version_new() -> int:
    """A topic's next `subscriptions_version`: random rather than one more, so that neither
    the count of a change that was rolled back (a transaction may have read it) nor the count
    of a topic re-created under an id used before comes back to match what a process saw."""
    return secrets.randbits(62)


class BumpedOnly(models.PositiveBigIntegerField):
    """A value only its own UPDATE statements change: a model's save() leaves the stored
    value as it is, so an instance read before a change cannot write the old value back."""

    def pre_save(self, model_instance: models.Model, add: bool) -> object:
        return super().pre_save(model_instance, add) if add else models.F(self.attname)


class LiveTopics(models.Manager["Topic"]):
    """Topics not being deleted: a topic whose purge is under way is gone for every reader,
    while its row still holds the name (messages/operations/purge.py)."""

    def get_queryset(self) -> models.QuerySet[Topic]:
        return super().get_queryset().filter(deleting_at__isnull=True)


class Topic(models.Model):
    name = models.CharField(max_length=200, unique=True, validators=[name_validator])
    biz = models.ForeignKey(Biz, null=True, blank=True, on_delete=models.PROTECT, related_name="topics")
    owner = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    retry_count = models.PositiveIntegerField(default=default_retry_count)
    retry_strategy = models.CharField(
        max_length=16, choices=RetryStrategy.choices, default=RetryStrategy.EXPONENTIAL
    )
    retry_interval_seconds = models.PositiveIntegerField(default=10)
    timeout_seconds = models.PositiveIntegerField(default=60)
    retention_days = models.PositiveIntegerField(default=7)
    alarm_emails = models.JSONField(default=list, blank=True)
    # [{"url", "format", "secret"}], checked by topics/webhooks.py against MQ_ALARM_WEBHOOK_HOSTS.
    alarm_webhooks = models.JSONField(default=list, blank=True)
    backlog_alarm_threshold = models.PositiveIntegerField(null=True, blank=True)
    # Backpressure: a produce that would leave any group with more NEW messages is refused
    # (429 backlog_full). None: no limit.
    max_backlog = models.PositiveIntegerField(null=True, blank=True)
    overflow = models.CharField(max_length=20, choices=Overflow.choices, default=Overflow.REJECT,
                                db_default=Overflow.REJECT)
    # Messages that name no expiry expire this long after they come due. None: never.
    default_ttl_seconds = models.PositiveIntegerField(null=True, blank=True)
    paused = models.BooleanField(default=False)
    # A transaction of this topic nobody resolved within MQ_TRANSACTION_GIVE_UP_SECONDS is
    # rolled back, or committed (a transaction over several topics commits only if each says so).
    check_give_up = models.CharField(max_length=16, choices=CheckGiveUp.choices, default=CheckGiveUp.ROLLBACK)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Set when the topic is deleted: its purge job removes everything of it, then the row.
    deleting_at = models.DateTimeField(null=True, blank=True)
    # Changed by every holder of the topic's exclusive lock, the only ones who may change
    # which groups subscribe and their filters (topics/locks.py): a publish reading the
    # value it read them at, under its shared lock, may use the subscriptions it read then.
    subscriptions_version = BumpedOnly(default=subscriptions_version_new, db_default=0, editable=False)

    objects = LiveTopics()
    all_objects = models.Manager()  # noqa: DJ012 - the second manager; also topics being deleted

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class TopicGroup(models.Model):
    """A consumer group of a topic. A subscribed group gets one copy of every message published
    to the topic (produced without a group); a group only messages were sent to by name
    (point-to-point, or `default` of a topic nobody subscribed to) has a row too, so that its
    backlog is counted and shown, but gets no copies until a consumer or an operator subscribes
    it. Its row is also the lock under which serial and sharded claims, and claims of a group
    with flow control, decide one at a time."""

    topic = models.ForeignKey(Topic, on_delete=models.CASCADE, related_name="groups")
    name = models.CharField(max_length=200, validators=[name_validator])
    mode = models.CharField(max_length=16, choices=DeliveryMode.choices, default=DeliveryMode.QUEUE)
    created_at = models.DateTimeField(auto_now_add=True)
    subscribed = models.BooleanField(default=True)
    # Flow control, enforced by the claim under this row's lock (messages/delivery/claims/gate.py).
    paused = models.BooleanField(default=False)
    max_in_flight = models.PositiveIntegerField(null=True, blank=True)  # RUNNING at once; None: no limit
    rate_per_second = models.FloatField(null=True, blank=True)  # deliveries per second; None: no limit
    key_concurrency = models.PositiveIntegerField(default=1)  # sharded: messages of one key at once
    # Queue mode: claims take the messages of the keys round-robin (messages/delivery/claims/fair.py).
    fair_keys = models.BooleanField(default=False, db_default=False)
    # Fair claims' cursor, the last key served: "k" + the key, "-" the messages without a key;
    # None: at the start of a round.
    fair_after = models.CharField(max_length=129, null=True, blank=True)  # noqa: DJ001 - NULL: round start
    # The rate limit's token bucket: tokens left when last refilled.
    rate_tokens = models.FloatField(default=0.0)
    rate_refilled_at = models.DateTimeField(null=True, blank=True)
    # Written at most every few seconds per broker process (messages/delivery/claims).
    last_pull_at = models.DateTimeField(null=True, blank=True)
    # The subscription's filter, {"tags": [...]} or {"expression": "..."} (messages/routing/):
    # a publish is copied to the group only when it matches. None: every publish.
    filter_spec = models.JSONField(null=True, blank=True)
    filter_set_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["topic_id", "name"]
        constraints = [models.UniqueConstraint(fields=["topic", "name"], name="uq_topic_group")]

    def __str__(self) -> str:
        return f"{self.topic_id}/{self.name}"

    @property
    def flow_controlled(self) -> bool:
        """Whether a queue claim must lock the group row to decide how many it may take."""
        return self.max_in_flight is not None or self.rate_per_second is not None


class GroupFilterSkips(models.Model):
    """How many publishes a filtered group's filter kept from it since the filter was set, in
    a few slots: a publish adds to one slot chosen at random in its own transaction, so
    concurrent publishes rarely wait for one another's row. The count is the slots' sum."""

    group = models.ForeignKey(TopicGroup, on_delete=models.CASCADE, related_name="filter_skips")
    slot = models.SmallIntegerField()
    skipped = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["group", "slot"], name="uq_filter_skips_slot")]

    def __str__(self) -> str:
        return f"{self.group_id}#{self.slot}: {self.skipped}"


class ApiToken(models.Model):
    """A bearer token. Only a SHA-256 of the secret is stored; the secret is shown once."""

    name = models.CharField(max_length=200, blank=True)
    biz = models.ForeignKey(Biz, null=True, blank=True, on_delete=models.CASCADE, related_name="tokens")
    prefix = models.CharField(max_length=16, unique=True)
    token_hash = models.CharField(max_length=64)
    scopes = models.JSONField(default=list)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name or self.prefix} ({', '.join(self.scopes)})"
