"""Bulk jobs: operations over more messages than one request should touch, worked through
in batches by a Celery task."""

from __future__ import annotations

from django.db import models


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
        REPLAY = "replay"  # copies of a topic's history into a new group (messages/operations/replay.py)
        ARCHIVE_REDRIVE = "archive_redrive"  # archived messages copied back (messages/archive/redrive.py)
        MOVE = "move"  # messages moved to another topic/group (messages/operations/move.py)
        PURGE = "purge"  # everything of a deleted topic (messages/operations/purge.py)

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
