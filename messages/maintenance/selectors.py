"""Reads for the Maintenance page and `/healthz/maintenance`: the jobs beat has scheduled,
each with its interval, last run, lag and outcome."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from messages.maintenance.models import MaintenanceRun
from messages.maintenance.schedule import JOB_OF_TASK, SCHEDULES, is_stale, job_lag

ORDER = {s.task: index for index, s in enumerate(SCHEDULES)}


def maintenance_health(*, now: datetime | None = None) -> list[dict[str, Any]]:
    """Exactly the enabled periodic tasks beat runs (none when `setup_maintenance` was never
    run), in the order of `SCHEDULES`, then any an operator added. A job's last run and
    outcome are its `maintenance_run` record; a task that records none (an operator's own)
    shows the time beat last sent it. `lag` is how far past due its next good run is; it is
    `stale` once that exceeds five minutes (or one interval, when longer)."""
    now = now or timezone.now()
    tasks = sorted(PeriodicTask.objects.filter(enabled=True).select_related("interval", "crontab"),
                   key=lambda t: (ORDER.get(t.task, len(ORDER)), t.name))
    runs = {r.job: r for r in MaintenanceRun.objects.all()}
    out = []
    for task in tasks:
        job = JOB_OF_TASK.get(task.task, task.task)
        run = runs.get(job)
        every = _every(task)
        last_ok = run.last_ok_at if run else None
        # A job of ours is on time by its good runs only; an operator's own task by beat's sends.
        recorded = task.task in JOB_OF_TASK
        lag = job_lag(every=every, last_ok_at=last_ok if recorded else task.last_run_at, since=task.start_time,
                      now=now)
        out.append({
            "job": job,
            "task": task.task,
            "interval_seconds": int(every.total_seconds()),
            "outcome": run.outcome if run and run.runs else None,
            "last_started_at": run.last_started_at if run else (None if recorded else task.last_run_at),
            "last_ok_at": last_ok,
            "last_duration_ms": run.last_duration_ms if run else None,
            "last_result": run.last_result if run else {},
            "last_error": run.last_error if run else "",
            "runs": run.runs if run else task.total_run_count,
            "lag_seconds": round(lag.total_seconds(), 1),
            "stale": is_stale(lag, every) or bool(run and run.outcome == MaintenanceRun.Outcome.ERROR),
        })
    return out


def _every(task: PeriodicTask) -> timedelta:
    """The task's interval; a crontab or other schedule counts as daily."""
    if task.interval is not None:
        return timedelta(seconds=task.interval.every * _PERIOD_SECONDS.get(task.interval.period, 1))
    return timedelta(days=1)


_PERIOD_SECONDS = {"days": 86400, "hours": 3600, "minutes": 60, "seconds": 1, "microseconds": 1e-6}
