"""Messages and their trace.

The hot table `mq_message` holds live messages. Its indexes are designed for the claim path:
every claim query filters and orders exactly along one of them, so a pull stays as fast with
millions of finished rows as with none.
"""

from __future__ import annotations

from django.db import models


class Status(models.TextChoices):
    NEW = "NEW"
    RUNNING = "RUNNING"
    SUCCESS = "SUCCESS"
    FAIL = "FAIL"
    TIMEOUT = "TIMEOUT"


DEAD_STATUSES = (Status.FAIL, Status.TIMEOUT)
FINISHED_STATUSES = (Status.SUCCESS, Status.FAIL, Status.TIMEOUT)


class Message(models.Model):
    id = models.BigAutoField(primary_key=True)
    topic = models.CharField(max_length=200)
    group_name = models.CharField(max_length=200, default="default")
    # The JSON text exactly as produced: stored and returned without re-interpretation.
    data = models.TextField()
    key = models.CharField(max_length=128, null=True, blank=True, db_column="msg_key")
    headers = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.NEW)
    effect_time = models.DateTimeField()
    retry_remaining = models.IntegerField(default=0)
    attempt = models.IntegerField(default=0)
    timeout_seconds = models.IntegerField(default=60)
    dedup_key = models.CharField(max_length=200, null=True, blank=True)
    lease_owner = models.CharField(max_length=200, null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    last_log = models.TextField(blank=True, default="")
    add_time = models.DateTimeField()
    update_time = models.DateTimeField()

    class Meta:
        db_table = "mq_message"
        indexes = [
            # queue claims: WHERE topic, group, status='NEW', effect_time <= now
            # ORDER BY effect_time, id (InnoDB appends the primary key to the index).
            models.Index(fields=["topic", "group_name", "status", "effect_time"], name="ix_msg_claim"),
            # serial claims and backlog ordering: the lowest id of a group in a status.
            models.Index(fields=["topic", "group_name", "status", "id"], name="ix_msg_order"),
            # sharded claims (head of a key) and key search with or without a topic.
            models.Index(fields=["key", "topic", "group_name", "status"], name="ix_msg_key"),
            # status filters in keyset (id) order; lease recovery reads the few RUNNING rows.
            models.Index(fields=["status", "id"], name="ix_msg_status"),
            # topic filters in keyset order (console and search without a group).
            models.Index(fields=["topic", "id"], name="ix_msg_topic"),
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
    status_after = models.CharField(max_length=8, blank=True, default="")
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
