"""Messages and their trace.

The hot table `mq_message` holds live messages. Its indexes are designed for the claim path:
every claim query filters and orders exactly along one of them, so a pull stays as fast with
millions of finished rows as with none.
"""

from __future__ import annotations

from typing import Any

from django.db import models


class Status(models.TextChoices):
    NEW = "NEW"
    RUNNING = "RUNNING"
    SUCCESS = "SUCCESS"
    FAIL = "FAIL"
    TIMEOUT = "TIMEOUT"
    EXPIRED = "EXPIRED"  # not delivered before its expiry: a dead letter
    PREPARED = "PREPARED"  # half of an open transaction: stored, never claimed (claims take NEW)
    CANCELLED = "CANCELLED"  # withdrawn before delivery: finished, not a dead letter


DEFAULT_PRIORITY = 4
MAX_PRIORITY = 9

DEAD_STATUSES = (Status.FAIL, Status.TIMEOUT, Status.EXPIRED)
FINISHED_STATUSES = (Status.SUCCESS, Status.FAIL, Status.TIMEOUT, Status.EXPIRED, Status.CANCELLED)


class Message(models.Model):
    id = models.BigAutoField(primary_key=True)
    topic = models.CharField(max_length=200)
    group_name = models.CharField(max_length=200, default="default")
    # The JSON text exactly as produced: stored and returned without re-interpretation.
    data = models.TextField()
    # NULL, not "", means "no key": sharded mode treats keyless messages as plain queue ones.
    key = models.CharField(max_length=128, null=True, blank=True, db_column="msg_key")  # noqa: DJ001
    headers = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.NEW)
    effect_time = models.DateTimeField()
    retry_remaining = models.IntegerField(default=0)
    attempt = models.IntegerField(default=0)
    timeout_seconds = models.IntegerField(default=60)
    # NULL keeps messages without a dedup key out of the unique (topic, group, dedup_key) index.
    dedup_key = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    lease_owner = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    last_log = models.TextField(blank=True, default="")
    add_time = models.DateTimeField()
    update_time = models.DateTimeField()
    # Who produced it (the token's name). With `add_time` this is the message's "produced"
    # trace event, which is not written as a trace row of its own (a third fewer trace rows).
    producer = models.CharField(max_length=200, default="")
    # When a claim leased the message for its current delivery, and the pulling consumer's
    # rank/total: with `lease_owner` and `attempt` this is that delivery's "pulled" trace
    # event, held by the row instead of a trace row (see messages/services/lifecycle.py).
    # NULL when the row holds no pull.
    pulled_at = models.DateTimeField(null=True, blank=True)
    pulled_rank = models.IntegerField(null=True, blank=True)
    pulled_total = models.IntegerField(null=True, blank=True)
    # The publish this row is a copy of: one random number shared by every group's copy of a
    # message produced without a group (and by replayed copies of it). A replay takes one
    # copy per publish. NULL for a point-to-point message (produced to one named group).
    publish_id = models.BigIntegerField(null=True, blank=True)
    # 0-9: a queue claim delivers a group's higher priorities first (serial and sharded
    # groups keep id order).
    # A database default too: rows written by other tools (bulk loads, SQL) need not name it.
    priority = models.SmallIntegerField(default=DEFAULT_PRIORITY, db_default=DEFAULT_PRIORITY)
    # Not delivered by then: EXPIRED (a dead letter), set by the claim or the expiry sweep.
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "mq_message"
        indexes = [
            # Delayed-message probes (next due, scheduled, backlog snapshots) and the
            # sharded claim: WHERE topic, group, status='NEW', effect_time range.
            models.Index(fields=["topic", "group_name", "status", "effect_time"], name="ix_msg_claim"),
            # queue claims: WHERE topic, group, status='NEW', effect_time <= now ORDER BY
            # priority DESC, effect_time, id (InnoDB appends the primary key). Finished rows
            # lie outside the (topic, group, 'NEW') prefix; delayed ones inside it are
            # skipped on the index entry (index condition on effect_time).
            models.Index(fields=["topic", "group_name", "status", "-priority", "effect_time"], name="ix_msg_priority"),
            # serial claims and backlog ordering: the lowest id of a group in a status.
            models.Index(fields=["topic", "group_name", "status", "id"], name="ix_msg_order"),
            # sharded claims (head of a key) and key search with or without a topic.
            models.Index(fields=["key", "topic", "group_name", "status"], name="ix_msg_key"),
            # status filters in keyset (id) order; lease recovery reads the few RUNNING rows.
            models.Index(fields=["status", "id"], name="ix_msg_status"),
            # topic filters in keyset order (console and search without a group).
            models.Index(fields=["topic", "id"], name="ix_msg_topic"),
            # the expiry sweep: NEW rows whose expires_at has passed (NULLs sort first, so
            # messages without an expiry are outside the range).
            models.Index(fields=["status", "expires_at"], name="ix_msg_expiry"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["topic", "group_name", "dedup_key"], name="uq_msg_dedup"
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.id} {self.topic}/{self.group_name} {self.status}"


class TraceEvent(models.TextChoices):
    PRODUCED = "produced"
    PULLED = "pulled"
    ACKED = "acked"
    NACKED = "nacked"
    RETRY_SCHEDULED = "retry_scheduled"
    DEAD = "dead"
    LEASE_EXPIRED = "lease_expired"
    EXTENDED = "extended"
    RELEASED = "released"
    STALE_ACK = "stale_ack"
    EDITED = "edited"
    REDRIVEN = "redriven"
    ARCHIVED = "archived"
    COMMITTED = "committed"
    CANCELLED = "cancelled"
    MOVED = "moved"  # to another topic/group: on the original and on its copy


class MessageTrace(models.Model):
    """One event in a message's life, written in the transaction of the change it describes."""

    id = models.BigAutoField(primary_key=True)
    message_id = models.BigIntegerField()
    event = models.CharField(max_length=24, choices=TraceEvent.choices)
    actor = models.CharField(max_length=200, blank=True, default="")
    at = models.DateTimeField()
    attempt = models.IntegerField(default=0)
    rank = models.IntegerField(null=True, blank=True)
    total = models.IntegerField(null=True, blank=True)
    status_after = models.CharField(max_length=16, blank=True, default="")
    log = models.TextField(blank=True, default="")

    class Meta:
        db_table = "mq_message_trace"
        indexes = [models.Index(fields=["message_id", "id"], name="ix_trace_message")]

    def __str__(self) -> str:
        return f"#{self.message_id} {self.event} by {self.actor}"


class BulkJob(models.Model):
    """A redrive / requeue / delete over a filter too large to answer in one request.

    Worked through in bounded batches by a Celery task; progress is data on this row so the
    API and the console's progress bar read it.
    """

    class Kind(models.TextChoices):
        REDRIVE = "redrive"
        REQUEUE = "requeue"
        DELETE = "delete"
        CANCEL = "cancel"
        REPLAY = "replay"  # copies of a topic's history into a new group (messages/services/replay.py)
        ARCHIVE_REDRIVE = "archive_redrive"  # archived messages copied back (messages/services/archive_redrive.py)
        MOVE = "move"  # messages moved to another topic/group (messages/services/move.py)
        PURGE = "purge"  # everything of a deleted topic (messages/services/purge.py)

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    kind = models.CharField(max_length=16, choices=Kind.choices)
    filter = models.JSONField(default=dict)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    actor = models.CharField(max_length=200)
    biz_ids = models.JSONField(null=True, blank=True)  # the requester's reach; None: all
    total = models.IntegerField(default=0)  # estimate taken at creation
    processed = models.IntegerField(default=0)
    # Keyset position: the job walks ids downwards from here, so re-running a batch is safe.
    cursor = models.BigIntegerField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "mq_bulk_job"
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"{self.kind} job #{self.id} {self.state}"


# --- maintenance: stats, archive, alarms, job runs -----------------------------------------


class StatsBucket(models.Model):
    """One minute of one (topic, group): event counts and, when the flush job took one in
    that minute, a backlog snapshot. Dashboards, the stats endpoint and alarms read these
    rows instead of counting the hot table."""

    topic = models.CharField(max_length=200)
    group_name = models.CharField(max_length=200)
    minute = models.DateTimeField()  # the start of the minute (UTC, seconds zero)
    produced = models.IntegerField(default=0)
    succeeded = models.IntegerField(default=0)
    failed = models.IntegerField(default=0)  # became dead letters (FAIL or TIMEOUT)
    retried = models.IntegerField(default=0)  # retries scheduled (nack or expired lease)
    lease_expired = models.IntegerField(default=0)
    expired = models.IntegerField(default=0, db_default=0)  # became EXPIRED dead letters (not delivered in time)
    # Backlog snapshot; null when no snapshot was taken in this minute.
    deliverable = models.IntegerField(null=True, blank=True)  # NEW, effect_time <= now
    delayed = models.IntegerField(null=True, blank=True)  # NEW, effect_time > now
    running = models.IntegerField(null=True, blank=True)
    dead = models.IntegerField(null=True, blank=True)
    oldest_deliverable_age_seconds = models.FloatField(null=True, blank=True)

    class Meta:
        db_table = "mq_stats_bucket"
        constraints = [
            models.UniqueConstraint(fields=["topic", "group_name", "minute"], name="uq_stats_bucket"),
        ]
        indexes = [models.Index(fields=["minute"], name="ix_stats_minute")]

    def __str__(self) -> str:
        return f"{self.topic}/{self.group_name} @ {self.minute:%Y-%m-%d %H:%M}"


class MessageArchive(models.Model):
    """A finished message moved out of the hot table after its topic's retention.

    Same columns and the same id as in `mq_message`; its trace rows stay in
    `mq_message_trace` (shared by message id) until the archive purge removes both.
    """

    id = models.BigIntegerField(primary_key=True)
    topic = models.CharField(max_length=200)
    group_name = models.CharField(max_length=200, default="default")
    data = models.TextField()
    # NULL, not "", means "no key": sharded mode treats keyless messages as plain queue ones.
    key = models.CharField(max_length=128, null=True, blank=True, db_column="msg_key")  # noqa: DJ001  # noqa: DJ001 - mirrors mq_message
    headers = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices)
    effect_time = models.DateTimeField()
    retry_remaining = models.IntegerField(default=0)
    attempt = models.IntegerField(default=0)
    timeout_seconds = models.IntegerField(default=60)
    dedup_key = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001 - mirrors mq_message
    lease_owner = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001 - mirrors mq_message
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    last_log = models.TextField(blank=True, default="")
    add_time = models.DateTimeField()
    update_time = models.DateTimeField()
    producer = models.CharField(max_length=200, default="")
    archived_at = models.DateTimeField()
    pulled_at = models.DateTimeField(null=True, blank=True)
    pulled_rank = models.IntegerField(null=True, blank=True)
    pulled_total = models.IntegerField(null=True, blank=True)
    publish_id = models.BigIntegerField(null=True, blank=True)
    # A database default too: rows written by other tools (bulk loads, SQL) need not name it.
    priority = models.SmallIntegerField(default=DEFAULT_PRIORITY, db_default=DEFAULT_PRIORITY)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "mq_message_archive"
        indexes = [
            models.Index(fields=["topic", "id"], name="ix_arch_topic"),
            models.Index(fields=["key", "topic"], name="ix_arch_key"),
            models.Index(fields=["archived_at", "id"], name="ix_arch_archived"),
        ]

    def __str__(self) -> str:
        return f"archived #{self.id} {self.topic}/{self.group_name} {self.status}"


class ArchiveExport(models.Model):
    """A day of archived history written to Parquet. `complete` once the day is over
    (today's partition is rewritten on every run until then)."""

    day = models.DateField(unique=True)
    complete = models.BooleanField(default=False)
    messages = models.IntegerField(default=0)
    traces = models.IntegerField(default=0)
    exported_at = models.DateTimeField()

    class Meta:
        db_table = "mq_archive_export"
        ordering = ["-day"]

    def __str__(self) -> str:
        return f"export {self.day} ({'complete' if self.complete else 'partial'})"


class Alarm(models.Model):
    """An alarm raised for a topic. At most one per (topic, kind, period): the unique row is
    what stops two workers from both sending the e-mail."""

    class Kind(models.TextChoices):
        BACKLOG = "backlog"
        OLDEST_AGE = "oldest_age"
        DEAD_LETTERS = "dead_letters"

    topic = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    period_start = models.DateTimeField()
    value = models.FloatField()
    threshold = models.FloatField()
    message = models.TextField()
    recipients = models.JSONField(default=list)
    created_at = models.DateTimeField()
    sent_at = models.DateTimeField(null=True, blank=True)
    send_error = models.TextField(blank=True, default="")
    # Webhook deliveries by URL: {"format", "state" (pending, sent, retrying, failed),
    # "attempts", "at", "error"}; each written under this row's lock by its Celery task.
    webhooks = models.JSONField(default=dict, blank=True)

    class Meta:
        db_table = "mq_alarm"
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["topic", "kind", "period_start"], name="uq_alarm_period"),
        ]
        indexes = [models.Index(fields=["created_at"], name="ix_alarm_created")]

    def __str__(self) -> str:
        return f"{self.kind} alarm on {self.topic} at {self.created_at:%Y-%m-%d %H:%M}"

    @property
    def webhook_outcomes(self) -> list[dict[str, Any]]:
        """Its webhook deliveries for display, each naming only its target's host."""
        from topics.webhooks import webhook_url_masked

        return [{**info, "target": webhook_url_masked(url)} for url, info in sorted(self.webhooks.items())]


class MaintenanceRun(models.Model):
    """The last run of one maintenance job, for the console's maintenance health panel.
    The flush job also keeps its watermarks (the last trace and message ids counted) here."""

    class Outcome(models.TextChoices):
        RUNNING = "running"
        OK = "ok"
        ERROR = "error"

    job = models.CharField(max_length=32, unique=True)
    outcome = models.CharField(max_length=8, choices=Outcome.choices, default=Outcome.RUNNING)
    last_started_at = models.DateTimeField(null=True, blank=True)
    last_finished_at = models.DateTimeField(null=True, blank=True)
    last_duration_ms = models.IntegerField(null=True, blank=True)
    last_result = models.JSONField(default=dict, blank=True)
    last_error = models.TextField(blank=True, default="")
    last_ok_at = models.DateTimeField(null=True, blank=True)
    runs = models.IntegerField(default=0)
    cursor = models.BigIntegerField(default=0)
    # The flush's second watermark: the last mq_message id whose "produced" it counted.
    message_cursor = models.BigIntegerField(default=0)

    class Meta:
        db_table = "mq_maintenance_run"
        ordering = ["job"]

    def __str__(self) -> str:
        return f"{self.job}: {self.outcome}"



# Transactions and schedules live in their own module; imported here so the app registers them.
from messages.semantics_models import Schedule, Transaction  # noqa: E402, F401
