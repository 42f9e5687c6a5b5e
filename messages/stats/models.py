"""Per-minute stats buckets: what the dashboard, the charts, the stats endpoint and the alarms
read instead of counting the hot table."""

from __future__ import annotations

from django.db import models


class StatsBucket(models.Model):
    """One minute of one (topic, group): event counts and, when the flush job took one in
    that minute, a backlog snapshot. Dashboards, the stats endpoint and alarms read these
    rows instead of counting the hot table."""

    topic = models.CharField(max_length=200)
    group_name = models.CharField(max_length=200)
    minute = models.DateTimeField()  # the start of the minute (UTC, seconds zero)
    produced = models.IntegerField(default=0)
    succeeded = models.IntegerField(default=0)
    failed = models.IntegerField(default=0)  # became FAIL or TIMEOUT (EXPIRED: `expired`)
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
