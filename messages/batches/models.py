"""Batches: messages produced together under one id, with one completion callback."""

from __future__ import annotations

from django.db import models


class Batch(models.Model):
    """A batch of messages (every copy of its publishes) and how many have finished each way.
    `pending` counts the members not finished yet: the transaction that takes it to zero
    sets `completed_at` and produces the callback, under this row's lock."""

    id = models.CharField(max_length=64, primary_key=True)
    biz_id = models.IntegerField(null=True, blank=True)
    producer = models.CharField(max_length=200, default="")
    callback_topic = models.CharField(max_length=200)
    total = models.IntegerField(default=0)
    pending = models.IntegerField(default=0)
    success = models.IntegerField(default=0)
    dead = models.IntegerField(default=0)
    expired = models.IntegerField(default=0)
    cancelled = models.IntegerField(default=0)
    created_at = models.DateTimeField()
    completed_at = models.DateTimeField(null=True, blank=True)
    callback_message_id = models.BigIntegerField(null=True, blank=True)
    callback_error = models.CharField(max_length=400, blank=True, default="")

    class Meta:
        db_table = "mq_batch"
        indexes = [models.Index(fields=["created_at"], name="ix_batch_created")]

    def __str__(self) -> str:
        return f"batch {self.id} ({self.total - self.pending}/{self.total})"
