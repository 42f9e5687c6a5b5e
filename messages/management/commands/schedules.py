"""List schedules, run one now, or produce the due ticks once (what the beat task does)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from messages.schedules import services as schedules
from mqcenter.core.auth import Principal

SYSTEM = Principal(name="manage.py", scopes=("admin",), biz_ids=None)


class Command(BaseCommand):
    help = "Recurring messages: list the schedules, run one now (run ID), or produce due ticks once (tick)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("action", choices=["list", "run", "tick"])
        parser.add_argument("schedule_id", nargs="?", type=int)

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "tick":
            self.stdout.write(" ".join(f"{k}={v}" for k, v in schedules.schedules_tick().items()))
        elif options["action"] == "run":
            if options["schedule_id"] is None:
                self.stderr.write("run needs a schedule id")
                raise SystemExit(2)
            result = schedules.schedule_run(principal=SYSTEM, schedule_id=options["schedule_id"])
            self.stdout.write(f"produced message {result.id} to {result.topic}/{result.group}")
        else:
            for s in schedules.schedules_list(principal=SYSTEM):
                self.stdout.write(
                    f"{s.id} {s.name} {'on ' if s.enabled else 'off'} {s.cron!r} {s.timezone} -> {s.topic}/"
                    f"{s.group_name or '*'} next={s.next_run_at:%Y-%m-%d %H:%M %Z} last={s.last_run_at or '-'}"
                    if s.next_run_at else f"{s.id} {s.name} off {s.cron!r} {s.timezone} -> {s.topic}"
                )
