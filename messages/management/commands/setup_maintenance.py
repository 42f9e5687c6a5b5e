"""Install the default maintenance schedules into django-celery-beat (idempotent)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from messages.maintenance.schedule import SCHEDULES

# Operators change intervals in the admin (Periodic tasks); running this command again keeps
# their changes unless --reset.


def schedules_install(*, reset: bool = False) -> list[str]:
    """Create the periodic tasks that are missing (all of them again with reset=True).
    Returns a line per task saying what happened."""
    lines = []
    with transaction.atomic():
        for name, task, _job, seconds, description in SCHEDULES:
            interval, _ = IntervalSchedule.objects.get_or_create(every=seconds, period=IntervalSchedule.SECONDS)
            existing = PeriodicTask.objects.filter(name=name).first()
            if existing is None:
                # Maintenance jobs run as soon as beat starts, so a new install shows every
                # job's health in the console at once instead of after its first interval.
                due_now = timezone.now() - timedelta(seconds=seconds) if task.startswith("messages.maintenance.") else None
                # start_time: when it was scheduled, from which a job that never ran is late.
                PeriodicTask.objects.create(
                    name=name, task=task, interval=interval, description=description, last_run_at=due_now,
                    start_time=timezone.now(),
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
