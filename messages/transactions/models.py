"""Transactions (half messages): batches stored PREPARED until their producer commits or
rolls back, or a check-back decides."""

from __future__ import annotations

import uuid

from django.db import models


def transaction_id_new() -> str:
    # Random, not sequential: the id is all a check endpoint and a commit name, and a
    # guessable one would let a token of the same business line commit another's batch.
    return uuid.uuid4().hex


class Transaction(models.Model):
    """A batch produced as PREPARED, waiting for its producer's commit or rollback.

    `message_ids` are the PREPARED rows (at most one produce call's worth). An open
    transaction past `next_check_at` is asked about at `check_url`; `log` is its own trace
    (checks, answers, the resolution), kept after the messages are committed or deleted.
    """

    class State(models.TextChoices):
        OPEN = "open"
        COMMITTED = "committed"
        ROLLED_BACK = "rolled_back"

    id = models.CharField(max_length=32, primary_key=True, default=transaction_id_new)
    biz_id = models.IntegerField(null=True, blank=True)
    producer = models.CharField(max_length=200)
    topics = models.JSONField(default=list)
    message_ids = models.JSONField(default=list)
    check_url = models.CharField(max_length=2000)
    check_after_seconds = models.IntegerField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.OPEN)
    next_check_at = models.DateTimeField()
    attempts = models.IntegerField(default=0)
    last_error = models.TextField(blank=True, default="")
    log = models.JSONField(default=list)
    created_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "mq_transaction"
        ordering = ["-created_at"]
        # The check-back task reads the open transactions that are due, oldest first.
        indexes = [models.Index(fields=["state", "next_check_at"], name="ix_txn_due")]

    def __str__(self) -> str:
        return f"transaction {self.id} {self.state}"
