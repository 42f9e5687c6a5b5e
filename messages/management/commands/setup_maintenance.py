"""Install the default maintenance schedules into django-celery-beat (idempotent)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask

# (task name, every N seconds, what it does). Operators change intervals in the admin
# (Periodic tasks); running this command again keeps their changes unless --reset.
DEFAULT_SCHEDULES: tuple[tuple[str, str, int, str], ...] = (
    ("mq maintenance: flush", "messages.maintenance.flush", 15, "stats buckets and backlog snapshots"),
    ("mq maintenance: expire", "messages.maintenance.expire", 15, "undelivered messages past expires_at to EXPIRED"),
    ("mq maintenance: cleanup", "messages.maintenance.cleanup", 3600, "archive, Parquet export, purge, registry prune"),
    ("mq maintenance: alarms", "messages.maintenance.alarms", 60, "backlog / age / dead-letter alarms by e-mail"),
    ("mq transactions: check-back", "messages.transactions.check", 5, "ask producers about open transactions"),
    ("mq alarms: webhooks", "messages.alarms.webhook", 5, "post alarms to their webhooks, retry failed posts"),
    ("mq schedules: tick", "messages.schedules.tick", 5, "produce the messages of due schedules"),
    ("mq reports: daily heap", "reports.report_heap_daily", 86400, "Spark heap report, e-mailed"),
)


def schedules_install(*, reset: bool = False) -> list[str]:
    """Create the periodic tasks that are missing (all of them again with reset=True).
    Returns a line per task saying what happened."""
    lines = []
    with transaction.atomic():
        for name, task, seconds, description in DEFAULT_SCHEDULES:
            interval, _ = IntervalSchedule.objects.get_or_create(every=seconds, period=IntervalSchedule.SECONDS)
            existing = PeriodicTask.objects.filter(name=name).first()
            if existing is None:
                # Maintenance jobs run as soon as beat starts, so a new install shows every
                # job's health in the console at once instead of after its first interval.
                due_now = timezone.now() - timedelta(seconds=seconds) if task.startswith("messages.maintenance.") else None
                PeriodicTask.objects.create(
                    name=name, task=task, interval=interval, description=description, last_run_at=due_now
                )
                lines.append(f"created {name}: every {seconds}s")
            elif reset:
                existing.task, existing.interval, existing.crontab = task, interval, None
                existing.enabled, existing.description = True, description
                existing.save()
                lines.append(f"reset {name}: every {seconds}s")
            else:
                lines.append(f"kept {name}: {existing.schedule}")
    return lines


class Command(BaseCommand):
    help = "Install the default maintenance schedules (flush, retry, delay, cleanup, alarms) for celery beat."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--reset", action="store_true", help="restore default intervals of existing tasks")

    def handle(self, *args: Any, **options: Any) -> None:
        for line in schedules_install(reset=options["reset"]):
            self.stdout.write(line)
