"""Fixtures for the Spark report tests: one SparkSession per test session (start-up costs
seconds), and one generated history per module stored where the reports read it: the live
table, the archive table and the Parquet export (through the real export service)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from django.core import mail
from django.test import override_settings

from messages.archive.models import ArchiveExport, MessageArchive
from messages.archive.services import archive_export
from messages.models import Message, MessageTrace
from reports import services as reports
from reports.models import ReportRun
from tests.spark import sql_truth
from tests.spark.world import SINCE, UNTIL, World, generate
from topics.models import Topic

THRESHOLDS = {"orders": 5, "mail": 100000, "2024": 1}
ALARM_EMAILS = {"orders": ["ops@shop.example"], "mail": ["mail-team@example.com"]}
ARCHIVED_AT = UNTIL + timedelta(hours=1)


@pytest.fixture(scope="session")
def spark_local() -> Any:
    from spark.session import spark_session

    # A few hundred rows: two shuffle partitions, not the default's empty tasks.
    os.environ.setdefault("MQ_SPARK_SHUFFLE_PARTITIONS", "2")

    return spark_session(master="local[2]")


def _split(world: World) -> tuple[list[dict[str, Any]], list[dict[str, Any]], set[int]]:
    """Finished messages with id % 3 == 0 are archived; of those, odd ids are also purged
    after the export (only in Parquet then, messages and traces); the rest stay live."""
    archived = [m for m in world.messages if m["status"] in ("SUCCESS", "FAIL", "TIMEOUT") and m["id"] % 3 == 0]
    archived_ids = {m["id"] for m in archived}
    live = [m for m in world.messages if m["id"] not in archived_ids]
    purged = {m["id"] for m in archived if m["id"] % 2 == 1}
    return live, archived, purged


def _store(world: World, archive_dir: str) -> tuple[dict[str, int], dict[str, Any]]:
    live, archived, purged = _split(world)
    for name, threshold in THRESHOLDS.items():
        Topic.objects.create(name=name, backlog_alarm_threshold=threshold, alarm_emails=ALARM_EMAILS.get(name, []))
    common = {"data": "{}", "retry_remaining": 0, "timeout_seconds": 60}
    Message.objects.bulk_create([Message(**m, **common) for m in live])
    MessageArchive.objects.bulk_create([MessageArchive(**m, **common, archived_at=ARCHIVED_AT) for m in archived])
    # The events rows hold ("produced", and a claim's "pulled" in `pulled_at`): no trace row.
    MessageTrace.objects.bulk_create([MessageTrace(**{k: v for k, v in t.items() if k != "in_row"})
                                      for t in world.traces if not t["in_row"]])
    with override_settings(MQ_ARCHIVE_PARQUET_DIR=archive_dir):
        exported = archive_export(now=ARCHIVED_AT + timedelta(hours=1))
    # The SQL truth, while every message is still in the live or the archive table.
    truth = {"trace": sql_truth.trace_truth(SINCE, UNTIL), "flow": sql_truth.heap_flow_truth(SINCE, UNTIL),
             "state": sql_truth.heap_state_truth(UNTIL.replace(tzinfo=None))}
    # The purge: exported history leaves the database.
    MessageArchive.objects.filter(id__in=purged).delete()
    MessageTrace.objects.filter(message_id__in=purged).delete()
    return {"live": len(live), "archived": len(archived), "purged": len(purged), **exported}, truth


def _clean() -> None:
    for model in (Message, MessageArchive, MessageTrace, ArchiveExport, ReportRun, Topic):
        model.objects.all().delete()


@pytest.fixture(scope="package")
def stored(django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: Any) -> Iterator[dict[str, Any]]:
    """The generated world, committed (Spark reads over its own JDBC connections)."""
    world = generate()
    archive_dir = tmp_path_factory.mktemp("archive")
    with django_db_blocker.unblock():
        _clean()
        counts, truth = _store(world, str(archive_dir))
    try:
        yield {"world": world, "archive_dir": str(archive_dir), "counts": counts, "sql_truth": truth}
    finally:
        with django_db_blocker.unblock():
            _clean()
        shutil.rmtree(archive_dir, ignore_errors=True)


@pytest.fixture(scope="package")
def report_config(stored: dict[str, Any], django_db_blocker: Any, spark_local: Any) -> Any:
    from reports.services import report_config

    with django_db_blocker.unblock(), override_settings(MQ_ARCHIVE_PARQUET_DIR=stored["archive_dir"]):
        config = report_config(since=SINCE, until=UNTIL)
    return replace(config, source=replace(config.source, partitions=3))


def _execute(kind: str, config: Any, django_db_blocker: Any) -> dict[str, Any]:
    """Create and execute a run through the services, as the Celery task does; returns the
    final row, the progress seen while it ran, and the mail it sent."""
    from reports.services import report_run_create, report_run_execute

    with django_db_blocker.unblock(), override_settings(
        MQ_REPORT_EMAILS=["reports@example.com"],
        EMAIL_BACKEND="django.core.mail.backends.locmem.EmailBackend",
    ):
        mail.outbox = []
        run = report_run_create(kind=kind, since=SINCE, until=UNTIL, actor="test", enqueue=False)
        assert run.state == ReportRun.State.QUEUED
        seen: list[tuple[str, int]] = []
        original = reports._progress

        def spy(run_id: int, percent: int, note: str) -> None:
            original(run_id, percent, note)
            row = ReportRun.objects.get(id=run_id)
            seen.append((row.state, row.progress))

        reports._progress = spy
        try:
            run = report_run_execute(run_id=run.id, config=config)
        finally:
            reports._progress = original
        return {"run": run, "progress": seen, "outbox": list(mail.outbox)}


@pytest.fixture(scope="package")
def trace_run(report_config: Any, django_db_blocker: Any) -> dict[str, Any]:
    return _execute("trace", report_config, django_db_blocker)


@pytest.fixture(scope="package")
def heap_run(report_config: Any, django_db_blocker: Any) -> dict[str, Any]:
    return _execute("heap", report_config, django_db_blocker)
