"""Cross-cutting records: the audit log of operator actions."""

from __future__ import annotations

from django.db import models


class AuditEntry(models.Model):
    """Who did what to which object, with the values before and after."""

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.CharField(max_length=200)
    action = models.CharField(max_length=64)
    target_type = models.CharField(max_length=64)
    target_id = models.CharField(max_length=200, blank=True, default="")
    target_name = models.CharField(max_length=200, blank=True, default="")  # as the console names it
    biz = models.CharField(max_length=100, blank=True, default="")
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)

    class Meta:
        db_table = "mq_audit"
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor} {self.action} {self.target_type}:{self.target_id}"


class ConsoleRole(models.TextChoices):
    VIEWER = "viewer"
    OPERATOR = "operator"
    ADMIN = "admin"


class ConsoleGrant(models.Model):
    """A console role for a user, on one business line or (biz empty) on all of them."""

    user = models.ForeignKey("auth.User", on_delete=models.CASCADE, related_name="console_grants")
    role = models.CharField(max_length=16, choices=ConsoleRole.choices)
    biz = models.ForeignKey("topics.Biz", null=True, blank=True, on_delete=models.CASCADE, related_name="grants")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "mq_console_grant"
        constraints = [models.UniqueConstraint(fields=["user", "role", "biz"], name="uq_console_grant")]

    def __str__(self) -> str:
        return f"{self.user_id} {self.role} on {self.biz_id or 'all'}"
