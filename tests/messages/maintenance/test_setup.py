"""Installing the beat schedules."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django_celery_beat.models import PeriodicTask

pytestmark = pytest.mark.django_db


def test_it_installs_every_maintenance_schedule_once_and_keeps_operator_changes() -> None:
    call_command("setup_maintenance", verbosity=0)
    flush = PeriodicTask.objects.get(task="messages.maintenance.flush")
    flush.interval.every = 120  # an operator slows the flush down
    flush.interval.save()

    call_command("setup_maintenance", verbosity=0)

    tasks = set(PeriodicTask.objects.values_list("task", flat=True))
    assert {f"messages.maintenance.{job}" for job in ("flush", "cleanup", "alarms")} <= tasks
    assert PeriodicTask.objects.filter(task="messages.maintenance.flush").count() == 1
    assert PeriodicTask.objects.get(task="messages.maintenance.flush").interval.every == 120
    # due at once: a new install shows every job's health without waiting an interval
    assert PeriodicTask.objects.get(task="messages.maintenance.cleanup").last_run_at is not None
