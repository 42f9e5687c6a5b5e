"""Bad input and missing parts: a clear error and a failed run recorded with the reason,
never a hung worker (a run has a time limit)."""

from __future__ import annotations

import socket
import time
from dataclasses import replace
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from mqcenter.core.errors import InvalidRequest
from reports.models import ReportRun
from reports.services import report_run_create, report_run_execute
from tests.spark.test_report_console import login
from tests.spark.world import SINCE, UNTIL

pytestmark = [pytest.mark.spark, pytest.mark.django_db, pytest.mark.timeout(300)]


def failed_run() -> ReportRun:
    run = ReportRun.objects.order_by("-id").first()
    assert run is not None and run.state == ReportRun.State.FAILED and run.finished_at is not None
    return run


def test_a_window_that_ends_before_it_starts_is_refused_and_recorded() -> None:
    with pytest.raises(InvalidRequest) as refused:
        report_run_create(kind="heap", since=UNTIL, until=SINCE, enqueue=False)
    assert "until must be after since" in refused.value.message
    run = failed_run()
    assert run.error == refused.value.message and run.params["since"] == UNTIL.isoformat()
    with pytest.raises(CommandError, match="until must be after since"):
        call_command("runreport", "trace", "--since", "2026-01-10T12:00Z", "--until", "2026-01-10T06:00Z")
    assert failed_run().actor == "manage.py runreport"


def test_an_unknown_topic_is_refused_and_recorded(stored: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequest, match="unknown topic 'nope'"):
        report_run_create(kind="trace", since=SINCE, until=UNTIL, topics=["orders", "nope"], enqueue=False)
    assert failed_run().params["topics"] == ["nope", "orders"]
    response = login("admin").post("/reports/run/", {"kind": "heap", "topic": "nope"})
    assert response.status_code == 400 and b"unknown topic" in response.content
    assert "unknown topic 'nope'" in failed_run().error
    assert not ReportRun.objects.filter(state=ReportRun.State.QUEUED).exists()


def test_a_report_of_some_topics_counts_those_only(report_config: Any, trace_run: dict[str, Any]) -> None:
    run = report_run_create(kind="trace", since=SINCE, until=UNTIL, topics=["orders"], enqueue=False)
    run = report_run_execute(run_id=run.id, config=replace(report_config, topics=("orders",)))
    assert run.state == ReportRun.State.DONE, run.error
    everything = [g for g in trace_run["run"].result["groups"] if g["topic"] == "orders"]
    assert run.result["groups"] == everything and run.result["topics"] == ["orders"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_unreachable_master_fails_the_run_at_once_with_the_reason(report_config: Any) -> None:
    master = f"spark://127.0.0.1:{free_port()}"
    run = report_run_create(kind="heap", since=SINCE, until=UNTIL, enqueue=False)
    started = time.monotonic()
    run = report_run_execute(run_id=run.id, config=replace(report_config, master=master))
    assert time.monotonic() - started < 10
    assert run.state == ReportRun.State.FAILED
    assert f"the Spark master {master} cannot be reached" in run.error and "refused" in run.error


def test_a_missing_jdbc_jar_fails_the_run_with_the_reason(report_config: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("MQ_JDBC_JAR", "/nonexistent/mariadb-java-client.jar")
    run = report_run_create(kind="trace", since=SINCE, until=UNTIL, enqueue=False)
    run = report_run_execute(run_id=run.id, config=report_config)
    assert run.state == ReportRun.State.FAILED
    assert "the MariaDB JDBC driver is not at /nonexistent/mariadb-java-client.jar" in run.error


def test_the_daily_report_fails_with_the_reason_where_a_part_of_a_set_up_installation_is_missing(
    monkeypatch: Any,
) -> None:
    from reports.tasks import report_heap_daily_task

    # PySpark and MariaDB are here: the installation was set up for reports, and its missing
    # JDBC driver is a breakage to show, not a choice to skip (tests/reports: never set up).
    monkeypatch.setenv("MQ_JDBC_JAR", "/nonexistent/mariadb-java-client.jar")
    result = report_heap_daily_task.apply().get()
    run = failed_run()
    assert result == {"report_run": run.id} and run.actor == "schedule"
    assert "the MariaDB JDBC driver is not at /nonexistent/mariadb-java-client.jar" in run.error


def test_a_run_past_its_time_limit_is_cancelled_and_recorded(report_config: Any) -> None:
    run = report_run_create(kind="heap", since=SINCE, until=UNTIL, enqueue=False)
    started = time.monotonic()
    run = report_run_execute(run_id=run.id, config=replace(report_config, time_limit_seconds=0.2))
    assert time.monotonic() - started < 60
    assert run.state == ReportRun.State.FAILED and run.result is None
    assert "ran past its time limit of 0.2 s" in run.error
    # The session serves the next run as before: the cancelled jobs left nothing behind.
    again = report_run_create(kind="trace", since=SINCE, until=UNTIL, enqueue=False)
    assert report_run_execute(run_id=again.id, config=report_config).state == ReportRun.State.DONE


def test_the_celery_task_stops_a_run_held_past_the_time_limit(settings: Any) -> None:
    from reports.tasks import REPORT_LIMITS, report_run_task

    assert settings.MQ_REPORT_TIME_LIMIT < REPORT_LIMITS["soft_time_limit"] < REPORT_LIMITS["time_limit"]
    assert report_run_task.soft_time_limit == REPORT_LIMITS["soft_time_limit"]


def test_the_reports_page_says_what_is_missing_instead_of_offering_a_run(monkeypatch: Any) -> None:
    monkeypatch.setenv("MQ_JDBC_JAR", "/nonexistent/mariadb-java-client.jar")
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    html = login("admin").get("/reports/").content.decode()
    assert 'id="reports-need"' in html and "Run now" not in html
    assert "Java is not installed" in html and "JDBC driver is not at" in html
    assert "Reports cannot run on this installation." in html and "install each part listed" in html  # no button to point at
    monkeypatch.undo()
    html = login("operator", name="op2").get("/reports/").content.decode()
    assert 'id="reports-need"' not in html and "Run now" in html
