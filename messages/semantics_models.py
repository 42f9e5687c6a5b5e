"""Transactions (half messages) and schedules (recurring messages): rows that produce or
hold messages without being messages themselves."""

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


class Schedule(models.Model):
    """A recurring message: `data` produced to (topic, group) on every tick of `cron` in
    `timezone`. `next_run_at` is the next tick (UTC); the beat task produces a tick's
    message with the dedup key `schedule:<id>:<tick>` before moving it on, so two beats,
    or a beat that died between the two steps, never store a tick twice."""

    name = models.CharField(max_length=200, unique=True)
    biz = models.ForeignKey("topics.Biz", null=True, blank=True, on_delete=models.PROTECT, related_name="schedules")
    topic = models.CharField(max_length=200)
    group_name = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001 - None: the topic's subscriptions
    data = models.TextField(default="null")  # JSON text, as a message stores it
    headers = models.JSONField(default=dict, blank=True)
    cron = models.CharField(max_length=200)
    timezone = models.CharField(max_length=64, default="UTC")
    enabled = models.BooleanField(default=True)
    next_run_at = models.DateTimeField(null=True, blank=True)  # None while disabled
    last_run_at = models.DateTimeField(null=True, blank=True)
    last_message_id = models.BigIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    created_by = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "mq_schedule"
        ordering = ["name"]
        indexes = [models.Index(fields=["enabled", "next_run_at"], name="ix_schedule_due")]

    def __str__(self) -> str:
        return f"schedule {self.name} ({self.cron} {self.timezone})"
