"""The quick start (SQLite, perhaps no Java) says plainly what the reports need."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.e2e  # runs the quick start


def test_the_sqlite_quick_start_says_what_reports_need(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "CELERY_BROKER_URL", "JAVA_HOME")}
    env.update(DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}", MQ_VAR_DIR=str(tmp_path),
               DJANGO_SETTINGS_MODULE="mqcenter.settings", PATH="/nonexistent")  # no java on the PATH
    done = subprocess.run([sys.executable, str(ROOT / "manage.py"), "quickstart", "--setup-only"], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "Reports   not available on this installation; they need:" in out
    assert "Java is not installed" in out
    assert "the reports read MySQL/MariaDB over JDBC, and this installation runs on sqlite" in out
    assert "docs/reports.md" in out


def test_the_daily_report_is_skipped_with_the_reason_where_reports_were_never_set_up(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "CELERY_BROKER_URL")}
    env.update(DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}", MQ_VAR_DIR=str(tmp_path),
               DJANGO_SETTINGS_MODULE="mqcenter.settings")
    code = (
        "import json; from reports.tasks import report_heap_daily_task; "
        "from reports.models import ReportRun; from messages.maintenance.models import MaintenanceRun; "
        "result = report_heap_daily_task.apply().get(); job = MaintenanceRun.objects.get(job='reports'); "
        "print(json.dumps([result, ReportRun.objects.count(), job.outcome, job.last_result]))"
    )
    for command in (["migrate", "--verbosity", "0"], ["shell", "-c", code]):
        done = subprocess.run([sys.executable, str(ROOT / "manage.py"), *command], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
    result, runs, outcome, stored = json.loads(done.stdout.strip().splitlines()[-1])
    assert "this installation runs on sqlite" in result["skipped"]
    assert (runs, outcome, stored) == (0, "ok", result)  # no failed run a day on the reports page
