"""The archive: finished messages moved out of the hot table after their topic's retention,
and the days of it exported to Parquet."""

from __future__ import annotations

from django.db import models

from messages.states import DEFAULT_PRIORITY, Status


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
    copied_at = models.DateTimeField(null=True, blank=True)
    tag = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001 - mirrors mq_message
    batch_id = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001 - mirrors mq_message
    dedup_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "mq_message_archive"
        indexes = [
            models.Index(fields=["topic", "id"], name="ix_arch_topic"),
            models.Index(fields=["key", "topic"], name="ix_arch_key"),
            models.Index(fields=["archived_at", "id"], name="ix_arch_archived"),
            # successes archived before the stats flush counted them (messages/stats/row_acks.py).
            models.Index(fields=["status", "update_time"], name="ix_arch_finished"),
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
