"""Reads for the console's Maintenance page: each job's last run."""

from __future__ import annotations

from typing import Any

from messages.maintenance.models import MaintenanceRun
from messages.maintenance.runs import JOBS


def maintenance_health() -> list[dict[str, Any]]:
    """Each maintenance job's last run: outcome, when, how long, what it did, last error.
    Jobs that never ran are listed with outcome None (beat or the worker is not running)."""
    runs = {r.job: r for r in MaintenanceRun.objects.all()}
    out = []
    for job in (*JOBS, *sorted(set(runs) - set(JOBS) - {"export"})):
        run = runs.get(job)
        out.append({
            "job": job,
            "outcome": run.outcome if run and run.runs else None,
            "last_started_at": run.last_started_at if run else None,
            "last_finished_at": run.last_finished_at if run else None,
            "last_ok_at": run.last_ok_at if run else None,
            "last_duration_ms": run.last_duration_ms if run else None,
            "last_result": run.last_result if run else {},
            "last_error": run.last_error if run else "",
            "runs": run.runs if run else 0,
        })
    return out
