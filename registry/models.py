"""Who is online: consumer instances (per subscription) and broker nodes."""

from __future__ import annotations

from django.db import models


class ConsumerInstance(models.Model):
    """One consumer's subscription to a (topic, group), kept alive by heartbeats."""

    consumer = models.CharField(max_length=200)
    topic = models.CharField(max_length=200)
    group_name = models.CharField(max_length=200)
    host = models.CharField(max_length=200, blank=True, default="")
    started_at = models.DateTimeField()
    last_heartbeat = models.DateTimeField()

    class Meta:
        db_table = "mq_registry_consumer"
        constraints = [
            models.UniqueConstraint(
                fields=["consumer", "topic", "group_name"], name="uq_registry_subscription"
            )
        ]
        indexes = [
            models.Index(fields=["topic", "group_name", "last_heartbeat"], name="ix_registry_group"),
            models.Index(fields=["last_heartbeat"], name="ix_registry_heartbeat"),
        ]

    def __str__(self) -> str:
        return f"{self.consumer} on {self.topic}/{self.group_name}"


class BrokerNode(models.Model):
    """A broker process; clients discover and fail over between the live ones."""

    node_id = models.CharField(max_length=200, unique=True)
    url = models.CharField(max_length=500)
    host = models.CharField(max_length=200, blank=True, default="")
    pid = models.IntegerField(default=0)
    started_at = models.DateTimeField()
    last_heartbeat = models.DateTimeField(db_index=True)
    # Long-polls waiting (parked between attempts) in the process at its last heartbeat.
    waiting_pulls = models.IntegerField(default=0)

    class Meta:
        db_table = "mq_registry_broker"

    def __str__(self) -> str:
        return f"{self.node_id} {self.url}"
