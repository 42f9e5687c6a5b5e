"""The quick start (SQLite, perhaps no Java) says plainly what the reports need."""

from __future__ import annotations

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
