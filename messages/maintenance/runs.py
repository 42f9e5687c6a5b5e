"""Maintenance job bookkeeping: each job's last run and outcome, for the console."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from django.db.models import F
from django.utils import timezone

from messages.maintenance.models import MaintenanceRun

logger = logging.getLogger(__name__)

# A hung job must not hold a worker forever; the next beat tick starts it again.
TASK_LIMITS = {"soft_time_limit": 540, "time_limit": 600}


def maintenance_run(*, job: str, work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run `work` and record start, end, duration and outcome on the job's row.

    The error is recorded and re-raised, so Celery logs it too. Two workers recording the
    same job at once just overwrite each other's "last run": the work itself is what must
    be (and is) safe to run concurrently.
    """
    started = timezone.now()
    clock = time.monotonic()
    MaintenanceRun.objects.get_or_create(job=job)
    MaintenanceRun.objects.filter(job=job).update(
        outcome=MaintenanceRun.Outcome.RUNNING, last_started_at=started
    )
    try:
        result = work()
    except Exception as exc:
        try:
            MaintenanceRun.objects.filter(job=job).update(
                outcome=MaintenanceRun.Outcome.ERROR,
                last_finished_at=timezone.now(),
                last_duration_ms=int((time.monotonic() - clock) * 1000),
                last_error=f"{type(exc).__name__}: {exc}"[:4000],
                runs=F("runs") + 1,
            )
        except Exception:  # the failure may have been the database itself
            logger.exception("could not record the failure of maintenance job %s", job)
        raise
    finished = timezone.now()
    MaintenanceRun.objects.filter(job=job).update(
        outcome=MaintenanceRun.Outcome.OK,
        last_finished_at=finished,
        last_ok_at=finished,
        last_duration_ms=int((time.monotonic() - clock) * 1000),
        last_result=result,
        last_error="",
        runs=F("runs") + 1,
    )
    logger.info("maintenance %s done in %.3fs: %s", job, time.monotonic() - clock, result)
    return result
