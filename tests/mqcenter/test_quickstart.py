"""The quick start tells the truth: a taken port fails it before "ready", and the lines it
prints (on its own port) produce, pull and acknowledge a real message."""

from __future__ import annotations

import json
import os
import signal
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


def _manage(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=_sqlite_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_it_refuses_a_taken_port_before_saying_ready(tmp_path: Path) -> None:
    holder, port = _taken_port()
    with holder:
        done = _manage(tmp_path, "quickstart", "--no-celery", "--port", str(port))
    assert done.returncode != 0
    assert "MQ Center is ready." not in done.stdout
    assert f"port {port} on 127.0.0.1 is not free" in done.stderr


def test_runbroker_refuses_a_taken_port(tmp_path: Path) -> None:
    holder, port = _taken_port()
    with holder:
        done = _manage(tmp_path, "runbroker", "--port", str(port))
    assert done.returncode != 0
    assert f"port {port} on 127.0.0.1 is not free" in done.stderr


@pytest.mark.parametrize("command", ["quickstart", "runbroker"])
@pytest.mark.parametrize("port", ["99999", "0", "http"])
def test_a_port_outside_1_to_65535_is_refused_before_anything_starts(tmp_path: Path, command: str, port: str) -> None:
    # The socket layer would listen on 99999 - 65536 (or any port, for 0) while every
    # printed address named the given one.
    done = _manage(tmp_path, command, "--port", port)
    assert done.returncode == 2
    assert "MQ Center is ready." not in done.stdout
    assert "argument --port: " in done.stderr and ("1-65535" in done.stderr or "not a port number" in done.stderr)
    assert not list(tmp_path.glob("*.sqlite3"))  # nothing was set up


def _printed_shell(out: str) -> str:
    """The printed lines to paste, as one shell script (their indentation taken away)."""
    block = out.split("  Paste into a shell (the README's lines):\n\n", 1)[1]
    lines = []
    for line in block.splitlines():
        if line and not line.startswith("    "):
            break
        lines.append(line[4:])
    return "\n".join(lines).strip("\n") + "\n"


def _readme_shell() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Five minutes with curl", 1)[1]
    return section.split("```sh\n", 1)[1].split("```", 1)[0]


def _wait_until_ready(proc: subprocess.Popen, log: Path, port: int) -> str:
    wait_for_healthz(f"http://127.0.0.1:{port}", proc, output=log.read_text)
    deadline = time.monotonic() + 30  # "ready" is printed once the broker answers
    while "MQ Center is ready." not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    return log.read_text()


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
            script = _printed_shell(_wait_until_ready(proc, log, port))
            export, rest = script.split("\n", 1)
            assert export.startswith(f"export MQ_BASE=http://127.0.0.1:{port} TOKEN=mq_")
            # The very lines of the README, but for the address and token filled in.
            readme_export, readme_rest = _readme_shell().split("\n", 1)
            assert readme_export.startswith("export MQ_BASE=http://127.0.0.1:8000 TOKEN=$(grep ^token=")
            assert rest == readme_rest
            done = subprocess.run(
                ["bash", "-c", "set -eu\n" + script], capture_output=True, text=True, timeout=60, check=False
            )
        finally:
            stop_processes([proc])
    assert done.returncode == 0, done.stderr
    produced, pulled_id, acked = done.stdout.strip().splitlines()
    assert json.loads(produced)["messages"][0]["group"] == "billing"
    produced_id = json.loads(produced)["messages"][0]["id"]
    answer: dict[str, Any] = json.loads(acked)
    assert int(pulled_id) == produced_id
    assert answer == {"results": [{"id": produced_id, "outcome": "success"}]}


def test_ctrl_c_stops_the_quick_start_and_its_celery_processes_cleanly(tmp_path: Path) -> None:
    """Ctrl-C in a terminal sends SIGINT to the whole foreground process group: the quick
    start, its broker and its Celery worker and beat. All end, and the exit code is 0."""
    port = free_port()
    log = tmp_path / "quickstart.log"
    with log.open("wb") as output:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "quickstart", "--port", str(port)],
            cwd=ROOT, env=_sqlite_env(tmp_path), stdout=output, stderr=subprocess.STDOUT,
            start_new_session=True,  # a process group of its own, as a shell's foreground job
        )
        try:
            _wait_until_ready(proc, log, port)
            os.killpg(proc.pid, signal.SIGINT)
            code = proc.wait(timeout=60)
        finally:
            stop_processes([proc])
    out = log.read_text()
    assert code == 0, out[-3000:]
    assert "CommandError" not in out and "Traceback" not in out, out[-3000:]
    with pytest.raises(ProcessLookupError):  # no process of the group is left
        os.killpg(proc.pid, 0)


def test_the_quick_starts_install_prints_no_build_warning_box_and_runs_once(tmp_path: Path) -> None:
    """scripts/quickstart.sh installs through scripts/install.sh: into a fresh virtualenv it
    prints one line (no setuptools notice box), and then nothing until pyproject.toml changes."""
    venv = tmp_path / "venv"
    first = subprocess.run([str(ROOT / "scripts" / "install.sh"), str(venv), "--no-deps"], cwd=ROOT,
                           capture_output=True, text=True, timeout=300, check=False)
    assert first.returncode == 0, first.stdout + first.stderr
    shown = [line for line in (first.stdout + first.stderr).splitlines()
             if not line.startswith("WARNING: Location")]  # this machine's pip configuration
    assert shown == [f"Installing MQ Center into {venv}/ ..."], shown
    assert (venv / "bin" / "python").exists()
    again = subprocess.run([str(ROOT / "scripts" / "install.sh"), str(venv), "--no-deps"], cwd=ROOT,
                           capture_output=True, text=True, timeout=60, check=False)
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")
