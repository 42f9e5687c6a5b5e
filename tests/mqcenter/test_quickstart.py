"""The quick start tells the truth: a taken port fails it before "ready", and the lines it
prints (on its own port) produce, pull and acknowledge a real message."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.server import free_port, stop_processes, wait_for_healthz

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e  # runs manage.py quickstart and runbroker


def _sqlite_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "CELERY_BROKER_URL")}
    env.update(
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        MQ_VAR_DIR=str(tmp_path),
        DJANGO_SETTINGS_MODULE="mqcenter.settings",
    )
    return env


def _taken_port() -> tuple[socket.socket, int]:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    return holder, holder.getsockname()[1]


def test_it_refuses_a_taken_port_before_saying_ready(tmp_path: Path) -> None:
    holder, port = _taken_port()
    with holder:
        done = subprocess.run(
            [sys.executable, "manage.py", "quickstart", "--no-celery", "--port", str(port)],
            cwd=ROOT,
            env=_sqlite_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode != 0
    assert "MQ Center is ready." not in done.stdout
    assert f"port {port} on 127.0.0.1 is not free" in done.stderr


def test_runbroker_refuses_a_taken_port(tmp_path: Path) -> None:
    holder, port = _taken_port()
    with holder:
        done = subprocess.run(
            [sys.executable, "manage.py", "runbroker", "--port", str(port)],
            cwd=ROOT,
            env=_sqlite_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode != 0
    assert f"port {port} on 127.0.0.1 is not free" in done.stderr


def _printed_shell(out: str) -> str:
    """The printed example lines as one shell script (labels and the note taken away)."""
    lines = []
    for line in out.splitlines():
        labelled = re.match(r"^  (In a shell|Produce|Pull|Ack):\s+(.*)$", line)
        if labelled:
            lines.append(labelled.group(2))
        elif lines and lines[-1].endswith("\\") and line.startswith("              "):
            lines.append(line.strip())
    return "set -eu\n" + "\n".join(lines) + "\n"


def test_it_prints_lines_that_ack_the_message_they_produced_on_the_chosen_port(
    tmp_path: Path,
) -> None:
    port = free_port()
    log = tmp_path / "quickstart.log"
    with log.open("wb") as output:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "quickstart", "--no-celery", "--port", str(port)],
            cwd=ROOT,
            env=_sqlite_env(tmp_path),
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for_healthz(f"http://127.0.0.1:{port}", proc, output=log.read_text)
            deadline = time.monotonic() + 30  # "ready" is printed once the broker answers
            while "MQ Center is ready." not in log.read_text() and time.monotonic() < deadline:
                time.sleep(0.1)
            script = _printed_shell(log.read_text())
            assert f"MQ_BASE=http://127.0.0.1:{port} " in script
            done = subprocess.run(
                ["bash", "-c", script], capture_output=True, text=True, timeout=60, check=False
            )
        finally:
            stop_processes([proc])
    assert done.returncode == 0, done.stderr
    produced, pulled_id, acked = done.stdout.strip().splitlines()
    produced_id = json.loads(produced)["messages"][0]["id"]
    answer: dict[str, Any] = json.loads(acked)
    assert int(pulled_id) == produced_id
    assert answer == {"results": [{"id": produced_id, "outcome": "success"}]}
