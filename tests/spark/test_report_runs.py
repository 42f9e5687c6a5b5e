"""Report runs as recorded for the console: progress, result, failure with the error, and the
heap report's e-mail (captured in the locmem outbox)."""

from __future__ import annotations

from dataclasses import replace
from email.mime.image import MIMEImage
from typing import Any

import pytest

from mqcenter.core.errors import InvalidRequest
from reports.models import ReportRun
from reports.services import report_run_create, report_run_execute
from tests.spark.world import SINCE, UNTIL

pytestmark = [pytest.mark.spark, pytest.mark.django_db, pytest.mark.timeout(300)]


def test_it_records_progress_and_stores_the_result(trace_run: dict[str, Any]) -> None:
    run = trace_run["run"]
    assert run.state == ReportRun.State.DONE and run.progress == 100 and run.error == ""
    assert run.result["kind"] == "trace" and run.result["groups"]
    assert run.started_at <= run.finished_at
    seen = trace_run["progress"]
    assert all(state == ReportRun.State.RUNNING for state, _ in seen)
    percents = [p for _, p in seen]
    assert percents == sorted(percents) and 0 < percents[0] < percents[-1] < 100


def test_it_records_a_failed_run_with_the_error_when_the_database_is_unreachable(
    report_config: Any,
) -> None:
    unreachable = replace(
        report_config, source=replace(report_config.source, url="jdbc:mariadb://127.0.0.1:1/nowhere")
    )
    run = report_run_create(kind="heap", since=SINCE, until=UNTIL, enqueue=False)
    run = report_run_execute(run_id=run.id, config=unreachable)
    assert run.state == ReportRun.State.FAILED
    assert run.result is None and run.finished_at is not None
    assert "Connection refused" in run.error or "Could not connect" in run.error, run.error
    assert len(run.error) <= 4000


def test_it_runs_a_run_only_once(trace_run: dict[str, Any]) -> None:
    again = report_run_execute(run_id=trace_run["run"].id)
    assert again.state == ReportRun.State.DONE and again.finished_at == trace_run["run"].finished_at


def test_it_refuses_an_empty_window() -> None:
    with pytest.raises(InvalidRequest):
        report_run_create(kind="heap", since=UNTIL, until=SINCE, enqueue=False)
    with pytest.raises(InvalidRequest):
        report_run_create(kind="bogus", enqueue=False)


def test_it_emails_the_heap_report_with_the_table_and_an_inline_chart(heap_run: dict[str, Any]) -> None:
    outbox = heap_run["outbox"]
    by_to = {tuple(m.to): m for m in outbox}
    assert set(by_to) == {("reports@example.com",), ("ops@shop.example",), ("mail-team@example.com",)}
    assert heap_run["run"].emailed_to == ["reports@example.com", "mail-team@example.com", "ops@shop.example"]
    groups = {(g["topic"], g["group"]): g for g in heap_run["run"].result["groups"]}
    for mail in outbox:
        html = mail.alternatives[0][0] if hasattr(mail.alternatives[0], "__getitem__") else mail.alternatives[0].content
        assert "text/html" in str(mail.alternatives[0])
        assert 'src="cid:heap-chart"' in html
        images = [a for a in mail.attachments if isinstance(a, MIMEImage)]
        assert len(images) == 1 and images[0]["Content-ID"] == "<heap-chart>"
        assert images[0].get_payload(decode=True).startswith(b"\x89PNG")
    everyone = by_to[("reports@example.com",)].alternatives[0][0]
    for (topic, group), row in groups.items():
        assert f"<td>{topic}</td><td>{group}</td><td>{row['backlog']}</td>" in everyone
    # A topic's own addresses see their topic only.
    ops = by_to[("ops@shop.example",)].alternatives[0][0]
    assert "<td>orders</td>" in ops and "<td>mail</td>" not in ops and "<td>2024</td>" not in ops
    assert "over threshold" in by_to[("ops@shop.example",)].subject


def test_it_runs_a_report_from_the_command_line_and_reports_a_failure(settings: Any) -> None:
    from django.core.management import CommandError, call_command

    settings.MQ_REPORT_JDBC_URL = "jdbc:mariadb://127.0.0.1:1/nowhere"
    with pytest.raises(CommandError) as failure:
        call_command("runreport", "trace", "--since", "2026-01-10T06:00", "--until", "2026-01-10T12:00Z")
    assert "failed" in str(failure.value) and "Connection refused" in str(failure.value)
    run = ReportRun.objects.filter(actor="manage.py runreport").order_by("-id").first()  # the newest
    assert run.state == ReportRun.State.FAILED
    assert run.params == {"since": "2026-01-10T06:00:00+00:00", "until": "2026-01-10T12:00:00+00:00"}
    with pytest.raises(CommandError):
        call_command("runreport", "heap", "--since", "yesterday")


def test_it_hands_a_new_run_to_celery_once_committed(settings: Any, django_capture_on_commit_callbacks: Any) -> None:
    from reports.tasks import report_run_task

    with django_capture_on_commit_callbacks() as callbacks:
        run = report_run_create(kind="trace", actor="test")
    assert len(callbacks) == 1 and run.state == ReportRun.State.QUEUED
    # The task is a thin door: it executes the run (here against an unreachable database).
    settings.MQ_REPORT_JDBC_URL = "jdbc:mariadb://127.0.0.1:1/nowhere"
    report_run_task.apply(args=[run.id])
    run.refresh_from_db()
    assert run.state == ReportRun.State.FAILED and "Connection refused" in run.error
