"""A schedule run by the real thing: two Celery beat processes and two workers, the tasks
installed by setup_maintenance. A tick due now is produced once, however many beats ask."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from messages.maintenance.models import MaintenanceRun
from messages.models import Message
from messages.schedules.models import Schedule
from tests.support.maintenance import CeleryProcesses, celery_procs, wait_for  # noqa: F401 - the fixture

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e, pytest.mark.timeout(360)]


def tick_runs() -> int:
    run = MaintenanceRun.objects.filter(job="schedules").first()
    return run.runs if run is not None else 0


def test_two_beats_produce_a_due_tick_once(celery_procs: CeleryProcesses) -> None:  # noqa: F811
    call_command("setup_maintenance", verbosity=0)
    tick = timezone.now().replace(microsecond=0) + timedelta(seconds=3)
    schedule = Schedule.objects.create(name="every-minute", topic="beat.ping", cron="* * * * *", next_run_at=tick)
    celery_procs.worker("w1")
    celery_procs.worker("w2")
    celery_procs.beat()
    celery_procs.beat()

    wait_for(lambda: Message.objects.filter(topic="beat.ping").exists(), timeout=120, what="the tick's message")
    seen = tick_runs()
    # Two beats ask for the tick every 5 s; on a loaded machine the workers take them late,
    # so wait for runs, not for a time.
    wait_for(lambda: tick_runs() >= seen + 3, timeout=180, what="more beat runs of the tick task")

    # The next minute's tick may also have come within the wait: one message per tick.
    ticks = [m.headers["mq-schedule-tick"] for m in Message.objects.filter(topic="beat.ping").order_by("id")]
    assert ticks[0] == tick.isoformat()
    assert len(ticks) == len(set(ticks)) <= 2, ticks
    schedule.refresh_from_db()
    assert schedule.next_run_at > tick
