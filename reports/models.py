"""Report runs: one row per Spark report run (trace or heap), its progress and its result.

Kept beside models.py (and imported there) so the maintenance models stay in one place.
"""

from __future__ import annotations

from django.db import models


class ReportRun(models.Model):
    """A trace or heap report run. Progress, error and result are data on this row, so the
    console's Reports page reads them while the Spark job runs in a worker."""

    class Kind(models.TextChoices):
        TRACE = "trace"
        HEAP = "heap"

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    kind = models.CharField(max_length=8, choices=Kind.choices)
    params = models.JSONField(default=dict)  # since, until (ISO 8601, UTC)
    state = models.CharField(max_length=8, choices=State.choices, default=State.QUEUED)
    progress = models.PositiveSmallIntegerField(default=0)  # 0-100
    note = models.CharField(max_length=200, blank=True, default="")  # the step in progress
    error = models.TextField(blank=True, default="")
    result = models.JSONField(null=True, blank=True)
    actor = models.CharField(max_length=200, blank=True, default="")
    emailed_to = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "mq_report_run"
        ordering = ["-id"]
        indexes = [models.Index(fields=["kind", "state", "id"], name="ix_report_kind")]

    def __str__(self) -> str:
        return f"{self.kind} report #{self.id} {self.state}"

    @property
    def seconds(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()
