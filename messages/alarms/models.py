"""Alarms raised for topics, with their e-mail and webhook deliveries."""

from __future__ import annotations

from typing import Any

from django.db import models


class Alarm(models.Model):
    """An alarm raised for a topic. At most one per (topic, kind, period): the unique row is
    what stops two workers from both sending the e-mail."""

    class Kind(models.TextChoices):
        BACKLOG = "backlog"
        OLDEST_AGE = "oldest_age"
        DEAD_LETTERS = "dead_letters"
        TEST = "test"  # sent from the console's "send test alarm"

    topic = models.CharField(max_length=200)
    # The group that weighs most in the alarm (largest backlog, oldest message, most dead
    # letters); empty for a test alarm.
    group_name = models.CharField(max_length=200, blank=True, default="")
    biz_id = models.BigIntegerField(null=True, blank=True)  # the topic's business line when raised
    kind = models.CharField(max_length=16, choices=Kind.choices)
    period_start = models.DateTimeField()
    value = models.FloatField()
    threshold = models.FloatField()
    message = models.TextField()
    recipients = models.JSONField(default=list)
    created_at = models.DateTimeField()
    sent_at = models.DateTimeField(null=True, blank=True)
    send_error = models.TextField(blank=True, default="")
    # Webhook deliveries by URL: {"format", "state" (pending, sent, retrying, failed),
    # "attempts", "retries", "at", "due", "error"}, written under this row's lock by the
    # delivery job (messages/alarms/webhooks.py); webhooks_due_at is the earliest "due" of a
    # target still pending or retrying.
    webhooks = models.JSONField(default=dict, blank=True)
    webhooks_due_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "mq_alarm"
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["topic", "kind", "period_start"], name="uq_alarm_period"),
        ]
        indexes = [
            models.Index(fields=["created_at"], name="ix_alarm_created"),
            models.Index(fields=["webhooks_due_at"], name="ix_alarm_webhooks_due"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} alarm on {self.topic} at {self.created_at:%Y-%m-%d %H:%M}"

    @property
    def webhook_outcomes(self) -> list[dict[str, Any]]:
        """Its webhook deliveries for display, each naming only its target's host."""
        from topics.webhooks import webhook_url_masked

        return [{**info, "target": webhook_url_masked(url)} for url, info in sorted(self.webhooks.items())]
