"""Schedules: recurring messages, produced on every tick of a cron expression in a time zone."""

from __future__ import annotations

from django.db import models


class Schedule(models.Model):
    """A recurring message: `data` produced to (topic, group) on every tick of `cron` in
    `timezone`. `next_run_at` is the next tick (UTC); the beat task produces a tick's
    message with the dedup key `schedule:<id>:<tick>` before moving it on, so two beats,
    or a beat that died between the two steps, never store a tick twice."""

    name = models.CharField(max_length=200)  # unique within its business line
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
        constraints = [models.UniqueConstraint(fields=["biz", "name"], name="uq_schedule_biz_name")]

    def __str__(self) -> str:
        return f"schedule {self.name} ({self.cron} {self.timezone})"
