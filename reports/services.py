"""Spark report runs: create, execute (with progress), store the result, e-mail the heap report.

The Spark code (`spark/`) knows nothing of Django; this module turns settings into its
configuration and keeps the run's state on its `ReportRun` row.
"""

from __future__ import annotations

import logging
import os
import time
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import close_old_connections, connection, connections, transaction
from django.utils import timezone

from mqcenter.celery import app as celery_app
from mqcenter.core.auth import Principal
from mqcenter.core.db import read_alias
from mqcenter.core.errors import InvalidRequest, NotFound
from reports.models import ReportRun
from reports.preflight import report_master_problem, report_requirements_missing, reports_not_set_up
from spark.session import spark_master

if TYPE_CHECKING:
    from spark.extract import JdbcSource
    from spark.jobs import ReportConfig

logger = logging.getLogger(__name__)

DEFAULT_WINDOW = timedelta(hours=24)
MAX_WINDOW = timedelta(days=366)
ERROR_CHARS = 4000


def report_window(
    *, since: datetime | None = None, until: datetime | None = None
) -> tuple[datetime, datetime]:
    """The [since, until) window of a report: the last 24 hours unless given."""
    until = until or timezone.now()
    since = since or until - DEFAULT_WINDOW
    if timezone.is_naive(since) or timezone.is_naive(until):
        raise InvalidRequest("since and until need a time zone (e.g. 2026-01-01T00:00:00Z)")
    if since >= until:
        raise InvalidRequest(
            f"the window ends ({until.isoformat()}) before it starts ({since.isoformat()}): until must be after since",
            details={"field": "until"},
        )
    if until - since > MAX_WINDOW:
        raise InvalidRequest("a report covers at most 366 days")
    return since, until


def report_run_create(
    *,
    kind: str,
    since: datetime | None = None,
    until: datetime | None = None,
    topics: list[str] | tuple[str, ...] = (),
    actor: str = "",
    enqueue: bool = True,
) -> ReportRun:
    """Record a queued run and, once committed, hand it to a Celery worker (`enqueue`).

    Bad input (an unknown topic, an empty or too long window) is refused with InvalidRequest,
    and recorded as a failed run with the reason, so the Reports page shows what was asked and
    why it did not run. An unknown report is refused with nothing recorded: it names no run.
    """
    if kind not in ReportRun.Kind.values:
        raise InvalidRequest(f"unknown report {kind[:50]!r}; use trace or heap", details={"field": "kind"})
    params: dict[str, Any] = {
        "since": since.isoformat() if since else None,
        "until": until.isoformat() if until else None,
    }
    if topics:
        params["topics"] = sorted(set(topics))
    try:
        since, until = report_window(since=since, until=until)
        _require_topics(topics)
    except InvalidRequest as exc:
        ReportRun.objects.create(kind=kind, params=params, actor=actor[:200], state=ReportRun.State.FAILED,
                                 error=exc.message, started_at=timezone.now(), finished_at=timezone.now())
        raise
    params.update(since=since.isoformat(), until=until.isoformat())
    run = ReportRun.objects.create(kind=kind, params=params, actor=actor[:200])
    if enqueue:
        transaction.on_commit(lambda: celery_app.send_task("reports.report_run", args=[run.id]))
    return run


def _require_topics(topics: list[str] | tuple[str, ...]) -> None:
    from topics.models import Topic

    known = set(Topic.objects.filter(name__in=list(topics)).values_list("name", flat=True))
    unknown = sorted(set(topics) - known)
    if unknown:
        raise InvalidRequest(f"unknown topic {unknown[0]!r}", details={"field": "topic"})


def report_run_get(*, run_id: int) -> ReportRun:
    try:
        return ReportRun.objects.get(id=run_id)
    except ReportRun.DoesNotExist:
        raise NotFound(f"report run {run_id} not found") from None


def report_run_execute(*, run_id: int, config: ReportConfig | None = None) -> ReportRun:
    """Run a queued report: running with progress, then done with its result or failed with
    the error. Returns the run's final row.

    The queued -> running update is conditional, so a task delivered twice (acks_late) runs
    the report once: the second delivery finds the run no longer queued and returns.
    Call outside a transaction: progress must be visible to the console while Spark runs.
    """
    claimed = ReportRun.objects.filter(id=run_id, state=ReportRun.State.QUEUED).update(
        state=ReportRun.State.RUNNING, started_at=timezone.now(), progress=0, note="starting"
    )
    run = report_run_get(run_id=run_id)
    if not claimed:
        return run
    clock = time.monotonic()
    try:
        problems = report_requirements_missing()
        if not problems:
            problem = report_master_problem((config.master if config else None) or spark_master())
            problems = [problem] if problem else []
        if problems:
            raise ReportUnavailable("; ".join(problems))
        from spark import jobs

        config = config or report_config(
            since=datetime.fromisoformat(run.params["since"]),
            until=datetime.fromisoformat(run.params["until"]),
            topics=tuple(run.params.get("topics") or ()),
        )
        job = jobs.run_trace_report if run.kind == ReportRun.Kind.TRACE else jobs.run_heap_report
        result = job(config, lambda percent, note: _progress(run_id, percent, note))
    except Exception as exc:
        if not connection.in_atomic_block:
            close_old_connections()  # the failure may have been our own lost connection
        if isinstance(exc, ReportUnavailable):
            # Expected where reports are not set up (the quick start on SQLite): the reason is
            # stored on the run and shown on the reports page; a traceback would say "bug".
            logger.warning("report run %s not run: %s", run_id, exc)
        else:
            logger.exception("report run %s failed", run_id)
        ReportRun.objects.filter(id=run_id).update(
            state=ReportRun.State.FAILED,
            error=_error_text(exc),
            finished_at=timezone.now(),
        )
        return report_run_get(run_id=run_id)
    ReportRun.objects.filter(id=run_id).update(
        state=ReportRun.State.DONE,
        progress=100,
        note=f"done in {time.monotonic() - clock:.1f}s",
        result=result,
        finished_at=timezone.now(),
    )
    run = report_run_get(run_id=run_id)
    if run.kind == ReportRun.Kind.HEAP:
        from reports.mail import report_email_send

        # The report is stored whatever happens to the mail; a mail failure is noted on it.
        try:
            sent_to = report_email_send(run=run)
            ReportRun.objects.filter(id=run_id).update(emailed_to=sent_to)
        except Exception as exc:
            logger.exception("report run %s: e-mail failed", run_id)
            ReportRun.objects.filter(id=run_id).update(note=f"e-mail failed: {exc}"[:200])
        run.refresh_from_db()
    return run


class ReportUnavailable(Exception):
    """This installation cannot run the report (a part it needs is missing or unreachable)."""


def report_heap_daily() -> dict[str, Any]:
    """The scheduled heap report (last 24 hours): run now, e-mailed when done.

    An installation never set up for reports (no PySpark, or SQLite as in the quick start)
    skips it: the reports page says what it lacks, and a failed run a day would call "broken"
    a part that was never installed. Where they were set up, a missing part (Java, the JDBC
    driver) fails the run with the reason, to be seen and fixed."""
    not_set_up = reports_not_set_up()
    if not_set_up:
        return {"skipped": "; ".join(not_set_up)}
    run = report_run_create(kind="heap", actor="schedule", enqueue=False)
    report_run_execute(run_id=run.id)
    return {"report_run": run.id}


def _progress(run_id: int, percent: int, note: str) -> None:
    ReportRun.objects.filter(id=run_id, state=ReportRun.State.RUNNING).update(
        progress=max(0, min(100, percent)), note=note[:200]
    )


def _error_text(exc: BaseException) -> str:
    """The error as an operator needs it: type and message, with Java's cause chain (a
    Py4J error carries the JVM's message, e.g. the connection refused) but no stack."""
    text = f"{type(exc).__name__}: {exc}"
    lines = [line for line in text.splitlines() if not line.strip().startswith("at ")]
    return "\n".join(lines)[:ERROR_CHARS]


def report_source() -> JdbcSource:
    """Where Spark reads the live tables: MQ_REPORT_JDBC_URL, else the read database
    (DATABASE_READ_URL), else the default database.

    Only MySQL/MariaDB databases can be read (MariaDB Connector/J); the embedded SQLite
    quick start cannot feed Spark.
    """
    from spark.extract import JdbcSource

    partitions = settings.MQ_REPORT_JDBC_PARTITIONS
    explicit = settings.MQ_REPORT_JDBC_URL
    # The reads may lag the writer: DATABASE_READ_URL's database when there is one.
    alias = read_alias()
    db = connections[alias].settings_dict
    if explicit:
        return JdbcSource(url=explicit, user=db.get("USER") or "", password=db.get("PASSWORD") or "",
                          partitions=partitions)
    if connections[alias].vendor != "mysql":
        raise InvalidRequest(
            "the Spark reports read MySQL/MariaDB over JDBC; set DATABASE_URL to mysql://... "
            "or MQ_REPORT_JDBC_URL"
        )
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 3306
    return JdbcSource(
        url=f"jdbc:mariadb://{host}:{port}/{db['NAME']}",
        user=db.get("USER") or "",
        password=db.get("PASSWORD") or "",
        partitions=partitions,
    )


def report_config(
    *, since: datetime, until: datetime, topics: tuple[str, ...] = (), source: JdbcSource | None = None
) -> ReportConfig:
    """The Spark job's configuration from settings: source, archive, alarm thresholds."""
    from spark.jobs import ReportConfig
    from topics.models import Topic

    archive = getattr(settings, "MQ_ARCHIVE_PARQUET_DIR", "") or ""
    thresholds = dict(
        Topic.objects.filter(backlog_alarm_threshold__isnull=False).values_list("name", "backlog_alarm_threshold")
    )
    return ReportConfig(
        source=source or report_source(),
        since=since,
        until=until,
        archive_messages=os.path.join(archive, "messages") if archive else None,
        archive_traces=os.path.join(archive, "traces") if archive else None,
        thresholds=thresholds,
        topics=topics,
        time_limit_seconds=settings.MQ_REPORT_TIME_LIMIT or None,
    )


def report_result_visible(*, principal: Principal, result: dict[str, Any] | None) -> dict[str, Any] | None:
    """The part of a report a principal may read: rows of topics in their business lines.

    Reports cover every topic; an operator of one business line sees only its topics
    (topics without a business line only by global principals).
    """
    if result is None or principal.biz_ids is None:
        return result
    from topics.models import Topic

    allowed = set(Topic.objects.filter(biz_id__in=principal.biz_ids).values_list("name", flat=True))
    visible = dict(result)
    for name in ("groups", "attempts", "reasons", "consumers", "hourly", "alarms"):
        if name in result:
            visible[name] = [row for row in result[name] if row.get("topic") in allowed]
    if "thresholds" in result:
        visible["thresholds"] = {t: n for t, n in result["thresholds"].items() if t in allowed}
    if "messages" in result:
        visible["messages"] = sum(row["messages"] for row in visible.get("groups", []))
    return visible


def report_error_visible(*, operator: Principal | None, run: ReportRun) -> str | None:
    """A failed run's error text for an operator of every business line the run covered, or
    None. The text may quote topics and data of any line the run read: a run over named
    topics shows it to operators of all their lines, a run over every topic only to global
    operators; viewers never see it."""
    if not run.error or operator is None:
        return None
    if operator.biz_ids is None:
        return run.error
    from topics.models import Topic

    names = run.params.get("topics") or []
    lines = set(Topic.objects.filter(name__in=names).values_list("biz_id", flat=True))
    if not names or len(lines) == 0 or None in lines or not lines <= operator.biz_ids:
        return None
    return run.error
