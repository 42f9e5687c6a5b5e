"""`manage.py quickstart`: everything a first run needs, on embedded defaults.

Migrates, creates an admin login and an admin API token (kept in var/quickstart.txt, since
both are shown only once), then runs the broker with a Celery worker and beat beside it and
stops them all on Ctrl-C.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from mqcenter.management.commands.runbroker import port_problem, tcp_port
from topics.services import token_create

READY_TIMEOUT_SECONDS = 120

# The README's "Five minutes with curl" lines after its `export` line (a test holds the two
# equal): produce to group billing, pull as that group keeping the first id, ack that id.
CURL_LINES = r"""# produce (durable before 201); batches of up to 1,000. The answer holds each message's id.
curl -s -X POST $MQ_BASE/api/v1/messages -H "Authorization: Bearer $TOKEN" \
  -H 'Content-Type: application/json' \
  -d '{"messages": [{"topic": "orders", "group": "billing", "data": {"order": 42},
                     "key": "customer-7", "dedup_key": "order-42-created", "retry_count": 3}]}'; echo

# pull as group billing: claims up to 10 messages, waiting up to 20 s for the first; keeps the
# first one's id. A pull without "group" is group "default", and a consumer's first pull
# subscribes its group: later publishes to "orders" without a group are copied to it too.
ID=$(curl -s -X POST $MQ_BASE/api/v1/pull -H "Authorization: Bearer $TOKEN" \
  -H 'Content-Type: application/json' \
  -d '{"topic": "orders", "group": "billing", "consumer": "me-1", "max_messages": 10, "wait_seconds": 20}' \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["messages"][0]["id"])'); echo $ID

# ack that id: SUCCESS, or FAIL (retried per the topic's policy, dead when no retries are
# left). An id this consumer does not hold (never pulled, or its lease expired) answers "stale".
curl -s -X POST $MQ_BASE/api/v1/ack -H "Authorization: Bearer $TOKEN" \
  -H 'Content-Type: application/json' \
  -d "{\"consumer\": \"me-1\", \"results\": [{\"id\": $ID, \"status\": \"SUCCESS\"}]}"; echo
"""


def examples(*, base: str, token: str) -> str:
    """The README's curl lines to paste into a shell, in order (produce, pull keeping the
    pulled message's id, ack that id), with this broker's address and token."""
    lines = f"export MQ_BASE={base} TOKEN={token}\n\n" + CURL_LINES
    return "  Paste into a shell (the README's lines):\n\n" + "".join(
        f"    {line}\n" if line else "\n" for line in lines.splitlines()
    )


class Command(BaseCommand):
    help = "Set up and run MQ Center on embedded defaults (broker + Celery worker + beat)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=tcp_port, default=8000)
        parser.add_argument("--no-celery", action="store_true", help="run the broker alone")
        parser.add_argument("--setup-only", action="store_true", help="prepare, print, and exit")

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["setup_only"]:
            # Before anything is printed: "ready" must mean the broker can listen.
            problem = port_problem(options["host"], options["port"])
            if problem:
                raise CommandError(f"MQ Center cannot start: {problem}.")
        call_command("migrate", verbosity=0)
        if "setup_maintenance" in _commands():
            call_command("setup_maintenance", verbosity=0)
        username, password, token = self._credentials()
        base = f"http://{options['host']}:{options['port']}"
        ready = (
            self.style.SUCCESS("\nMQ Center is ready.\n")
            + f"\n  Console     {base}/   (login: {username} / {password})\n"
            f"  API docs    {base}/api/docs/\n"
            f"  API token   {token}\n"
            f"  (saved in {self._secrets_file()})\n\n" + examples(base=base, token=token) + "\n"
            + self._reports_line() + "\n\n"
        )
        if options["setup_only"]:
            self.stdout.write(ready)
            return
        self._run(options, ready)

    def _reports_line(self) -> str:
        """Whether the Spark reports can run here, and if not, what they need (the SQLite
        quick start cannot feed them)."""
        from reports.preflight import report_requirements_missing

        missing = report_requirements_missing()
        if not missing:
            return "  Reports   ready: console -> Reports, or manage.py runreport heap|trace"
        return (
            "  Reports   not available on this installation; they need:\n"
            + "".join(f"              - {problem}\n" for problem in missing)
            + "            (see docs/reports.md)"
        )

    def _secrets_file(self) -> Path:
        return Path(settings.VAR_DIR) / "quickstart.txt"

    def _credentials(self) -> tuple[str, str, str]:
        """The admin login and token: made once, then read back from var/quickstart.txt."""
        path = self._secrets_file()
        if path.exists():
            saved = dict(
                line.split("=", 1) for line in path.read_text().splitlines() if "=" in line
            )
            if {"username", "password", "token"} <= saved.keys():
                return saved["username"], saved["password"], saved["token"]
        username = os.environ.get("MQ_ADMIN_USERNAME", "admin")
        password = os.environ.get("MQ_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
        user_model = get_user_model()
        user = user_model.objects.filter(username=username).first() or user_model(username=username)
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        token, _ = token_create(actor="quickstart", scopes=["admin"], name="quickstart")
        path.write_text(f"username={username}\npassword={password}\ntoken={token}\n")
        path.chmod(0o600)
        return username, password, token

    def _run(self, options: dict[str, Any], ready: str) -> None:
        python = sys.executable
        manage = str(Path(settings.BASE_DIR) / "manage.py")
        procs: list[subprocess.Popen[bytes]] = []
        names = ["broker"] if options["no_celery"] else ["Celery worker", "Celery outbound worker", "Celery beat", "broker"]
        asked_to_stop: list[bool] = []

        def stop(*_: Any) -> None:
            for proc in procs:
                if proc.poll() is None:
                    proc.terminate()

        def stop_asked(*_: Any) -> None:
            asked_to_stop.append(True)
            stop()

        # Ctrl-C, SIGTERM and a closed terminal are a clean stop: every process is ended with
        # SIGTERM, and the quick start exits 0. The children run in a process group of their
        # own (`process_group=0`), so a terminal's Ctrl-C reaches only this process: SIGINT
        # straight into a Celery worker would interrupt the task it is running wherever it
        # stands (an import half done), where SIGTERM lets it finish the task first.
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, stop_asked)
        if not options["no_celery"]:
            celery = [python, "-m", "celery", "-A", "mqcenter"]
            queue, outbound = settings.CELERY_TASK_DEFAULT_QUEUE, settings.MQ_OUTBOUND_QUEUE
            procs.append(subprocess.Popen([*celery, "worker", "-l", "warning", "-P", "solo", "-Q", queue,
                                           "-n", "maintenance@%h"], process_group=0))
            # Outbound calls on a worker of their own: a slow remote host never delays maintenance.
            procs.append(subprocess.Popen([*celery, "worker", "-l", "warning", "-P", "threads", "-c", "4",
                                           "-Q", outbound, "-n", "outbound@%h"], process_group=0))
            procs.append(subprocess.Popen([*celery, "beat", "-l", "warning"], process_group=0))
        procs.append(
            subprocess.Popen(
                [
                    python,
                    manage,
                    "runbroker",
                    "--host",
                    options["host"],
                    "--port",
                    str(options["port"]),
                ],
                process_group=0,
            )
        )

        try:
            # "Ready" once the broker answers on its port, so the printed lines work when pasted.
            deadline = time.monotonic() + READY_TIMEOUT_SECONDS
            while procs[-1].poll() is None and time.monotonic() < deadline:
                if _accepts(options["host"], options["port"]):
                    self.stdout.write(ready)
                    self.stdout.flush()
                    break
                time.sleep(0.2)  # polling until the broker listens
            while all(proc.poll() is None for proc in procs):
                time.sleep(0.5)
        finally:
            stop()
            for proc in procs:
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
        if not asked_to_stop:
            # A process ended by itself (the broker's port taken meanwhile, a crash): the
            # quick start failed, and says which one.
            ended = next(
                name
                for name, proc in zip(names, procs, strict=True)
                if proc.returncode != -signal.SIGTERM
            )
            raise CommandError(f"MQ Center stopped: the {ended} process ended.")


def _accepts(host: str, port: int) -> bool:
    """Whether something accepts connections on host:port (a connect, never a bind: a bind
    could take the port from under the starting broker)."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _commands() -> set[str]:
    from django.core.management import get_commands

    return set(get_commands())
