"""Run a Spark report now: `manage.py runreport trace|heap [--since ...] [--until ...]`."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from mqcenter.core.errors import MQError
from reports.formatting import heap_verdicts, human_age, human_drain, trace_verdicts
from reports.models import ReportRun
from reports.services import report_run_create, report_run_execute


def moment(text: str) -> datetime:
    """An ISO 8601 date or datetime; without a zone it is UTC."""
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise CommandError(f"not an ISO 8601 date/time: {text!r}") from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


# The trace summary's status columns (the report's names) and widths: every message of a
# row is in exactly one, so they add up to its messages.
TRACE_COLUMNS = (("success", 8), ("fail", 6), ("timeout", 7), ("expired", 7), ("cancelled", 9),
                 ("new", 6), ("running", 7), ("prepared", 8))


class Command(BaseCommand):
    help = "Run the trace or heap report (PySpark; SPARK_MASTER picks the cluster) and store it."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("kind", choices=ReportRun.Kind.values)
        parser.add_argument("--since", type=moment, help="window start, ISO 8601 (default: until - 24h)")
        parser.add_argument("--until", type=moment, help="window end, ISO 8601 (default: now)")
        parser.add_argument("--topic", action="append", default=[], help="only this topic (repeatable)")
        parser.add_argument("--queue", action="store_true", help="hand the run to a Celery worker instead")
        parser.add_argument("--json", action="store_true", help="print the result as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            run = report_run_create(
                kind=options["kind"], since=options["since"], until=options["until"], topics=options["topic"],
                actor="manage.py runreport", enqueue=options["queue"],
            )
        except MQError as exc:
            raise CommandError(exc.message) from exc
        if options["queue"]:
            self.stdout.write(f"report run #{run.id} queued")
            return
        self.stderr.write(f"report run #{run.id}: {run.kind} {run.params['since']} .. {run.params['until']}")
        run = report_run_execute(run_id=run.id)
        if run.state != ReportRun.State.DONE:
            raise CommandError(f"report run #{run.id} failed: {run.error}")
        if options["json"]:
            self.stdout.write(json.dumps(run.result, indent=2))
            return
        self._summary(run)

    def _summary(self, run: ReportRun) -> None:
        result = run.result or {}
        out = self.stdout.write
        out(f"report run #{run.id} done in {run.seconds:.1f}s")
        if run.kind == ReportRun.Kind.TRACE:
            out(f"{result.get('messages', 0)} messages produced in the window")
            # msgs = the sum of the status columns after it.
            out(f"{'topic/group':40} {'msgs':>8} "
                + " ".join(f"{name:>{width}}" for name, width in TRACE_COLUMNS)
                + f" {'lat p50':>8} {'lat p99':>8}")
            for g in result.get("groups", []):
                out(f"{g['topic'] + '/' + g['group']:40} {g['messages']:>8} "
                    + " ".join(f"{g.get(name) or 0:>{width}}" for name, width in TRACE_COLUMNS)
                    + f" {_num(g['latency_p50']):>8} {_num(g['latency_p99']):>8}")
            for v in trace_verdicts(result):
                out(f"{v['topic']}: {v['verdict']}")
        else:
            out(f"{'topic/group':40} {'backlog':>8} {'delayed':>8} {'running':>8} {'oldest':>12} {'in/h':>8} "
                f"{'out/h':>8} {'trend':>9}  drain")
            for g in result.get("groups", []):
                out(f"{g['topic'] + '/' + g['group']:40} {g['backlog']:>8} {g['delayed']:>8} {g['running']:>8} "
                    f"{human_age(g['oldest_age_seconds']):>12} {_num(g['inflow_per_hour']):>8} "
                    f"{_num(g['outflow_per_hour']):>8} {g['trend']:>9}  {human_drain(g)}")
            for v in heap_verdicts(result):
                out(f"{v['topic']}: {v['verdict']}")
            for a in result.get("alarms", []):
                out(f"ALARM {a['topic']}/{a['group']}: backlog {a['backlog']} >= {a['threshold']}")
            if run.emailed_to:
                out("e-mailed to " + ", ".join(run.emailed_to))


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"
