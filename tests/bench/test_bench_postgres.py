"""The benchmark on PostgreSQL: its own database limit and the broker's produce figure,
stored apart from MariaDB's (`*_pg`) and judged against PostgreSQL's limit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.server import ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def test_it_measures_postgresql_against_its_own_limit(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--database",
            "postgres",
            "--scale",
            "toy",
            "--results",
            str(tmp_path),
            "dblimit",
            "produce",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    figures = json.loads((tmp_path / "results.json").read_text())["figures"]
    for name in ("dblimit_insert_pg", "dblimit_claim_ack_pg", "mq_produce_pg"):
        assert figures[name]["database"] == "postgres" and figures[name]["median"] > 0, name
    assert "mq_produce" not in figures and "dblimit_insert" not in figures  # MariaDB's stay apart
    # where the limit's CPU went: the server's part (at toy sizes a clock tick is ~25 µs a
    # message, so only its presence is checked) and the clients' (per-process CPU clocks)
    split = figures["dblimit_claim_ack_pg"]["cpu_us_per_message"]
    assert set(split) == {"postgresql", "clients"} and split["clients"]["median"] > 0
    table = (tmp_path / "results.md").read_text()
    assert "produce throughput on PostgreSQL, msg/s" in table and "PostgreSQL limit insert" in table


def test_it_refuses_figures_that_run_on_mariadb_only() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--database", "postgres", "latency"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and "with --database postgres, figures are" in done.stderr
