"""Maintenance job runs: each job's last run and outcome."""

from __future__ import annotations

from django.db import models


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
    # The flush's third watermark: the last (update_time, id) of a success its message row
    # holds that it counted (messages/stats/row_acks.py); NULL: none yet.
    acked_time = models.DateTimeField(null=True, blank=True)
    acked_id = models.BigIntegerField(default=0)
    # Trace rows up to this id were written before first deliveries' successes were held by
    # their rows: an "acked" row among them is the ack itself, counted from the trace.
    acked_trace_floor = models.BigIntegerField(default=0)

    class Meta:
        db_table = "mq_maintenance_run"
        ordering = ["job"]

    def __str__(self) -> str:
        return f"{self.job}: {self.outcome}"
