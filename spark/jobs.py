"""Report entry points: extract, transform, load, with progress reported as they go.

`run_trace_report(config)` and `run_heap_report(config)` return JSON-ready dicts. They take
everything from `config` (no Django, no settings), so the same call runs in a Celery worker,
a management command, a test or `spark-submit`.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from spark import extract, load
from spark.extract import MESSAGE_SCHEMA, TRACE_SCHEMA, JdbcSource, sql_datetime
from spark.session import spark_session
from spark.transform import KEYS, asof, heap, trace

Progress = Callable[[int, str], None]


@dataclass(frozen=True)
class ReportConfig:
    """What a report reads and over which window. Datetimes are UTC (naive or aware)."""

    source: JdbcSource
    since: datetime
    until: datetime
    archive_table: str | None = extract.ARCHIVE_TABLE  # archived messages still in the database
    archive_messages: str | None = None  # Parquet directory of archived messages
    archive_traces: str | None = None  # Parquet directory of archived trace events
    thresholds: dict[str, int] = field(default_factory=dict)  # topic -> backlog alarm threshold
    top_reasons: int = 5
    master: str | None = None
    topics: tuple[str, ...] = ()  # only these topics; empty: every topic
    time_limit_seconds: float | None = None  # past it, the run's Spark jobs are cancelled


class ReportTimeout(Exception):
    """A report ran past its time limit; its Spark jobs were cancelled."""


# Topic names as the broker allows them: safe inside a SQL string literal.
TOPIC_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$")


def topic_filter(topics: tuple[str, ...]) -> tuple[str, Column]:
    """The SQL condition (for the database) and the Column (for Parquet) of a topic list."""
    if not topics:
        return "1 = 1", F.lit(True)
    for name in topics:
        if not TOPIC_NAME.match(name):
            raise ValueError(f"not a topic name: {name!r}")
    return f"topic IN ({', '.join(repr(t) for t in topics)})", F.col("topic").isin(*topics)


@contextmanager
def time_limited(spark: SparkSession, limit: float | None) -> Iterator[Callable[[], None]]:
    """Run the block's Spark jobs in their own job group, cancelled when `limit` seconds
    pass. Yields a check to call between steps (a job started after the cancel would run on);
    both end in ReportTimeout."""
    if not limit:
        yield lambda: None
        return
    context = spark.sparkContext
    group = f"mq-report-{uuid.uuid4().hex[:12]}"
    context.setJobGroup(group, "MQ Center report", interruptOnCancel=True)
    expired = threading.Event()

    def cancel() -> None:
        expired.set()
        context.cancelJobGroup(group)

    def check() -> None:
        if expired.is_set():
            raise ReportTimeout(f"the report ran past its time limit of {limit:g} s; its Spark jobs were cancelled")

    timer = threading.Timer(limit, cancel)
    timer.daemon = True
    timer.start()
    try:
        yield check
        check()
    except ReportTimeout:
        raise
    except Exception as exc:
        if expired.is_set():
            raise ReportTimeout(
                f"the report ran past its time limit of {limit:g} s; its Spark jobs were cancelled"
            ) from exc
        raise
    finally:
        timer.cancel()
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]


def _utc_naive(value: datetime) -> datetime:
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value


def _noop(percent: int, note: str) -> None:
    return None


class _Steps:
    """Reports progress as fractions of a job's known steps (and checks the time limit)."""

    def __init__(self, progress: Progress, total: int) -> None:
        self.progress, self.total, self.done = progress, total, 0
        self.check: Callable[[], None] = lambda: None

    def __call__(self, note: str) -> None:
        self.check()
        self.done += 1
        self.progress(min(99, int(100 * self.done / self.total)), note)


def _run(
    config: ReportConfig,
    progress: Progress | None,
    steps: int,
    body: Callable[[SparkSession, ReportConfig, _Steps], dict[str, Any]],
) -> dict[str, Any]:
    started = time.monotonic()
    step = _Steps(progress or _noop, steps)
    spark = spark_session(master=config.master)
    step("session ready")
    with time_limited(spark, config.time_limit_seconds) as check:
        step.check = check
        result = body(spark, config, step)
    result["topics"] = list(config.topics)
    result["seconds"] = round(time.monotonic() - started, 3)
    return result


def _messages(spark: SparkSession, config: ReportConfig, *, where: str, keep: Column) -> DataFrame:
    """Messages matching `where` (SQL, pushed to the database) and `keep` (the same filter
    for Parquet), of the configured topics: live first, then the archive table, then the
    exported history."""
    sql, column = topic_filter(config.topics)
    where, keep = f"({where}) AND {sql}", keep & column
    sources = [extract.live_messages(spark, config.source, where=where)]
    if config.archive_table:
        sources.append(extract.live_messages(spark, config.source, where=where, table=config.archive_table))
    sources.append(extract.archived(spark, config.archive_messages, MESSAGE_SCHEMA).where(keep))
    return extract.union_unique(*sources)


def _persisted(df: DataFrame) -> DataFrame:
    # Each report action reuses the extracted rows: read the database once, not per figure.
    return df.persist(StorageLevel.MEMORY_AND_DISK)


def run_trace_report(config: ReportConfig, progress: Progress | None = None) -> dict[str, Any]:
    """The trace report for messages produced in [since, until)."""
    return _run(config, progress, 7, _trace)


def _trace(spark: SparkSession, config: ReportConfig, step: _Steps) -> dict[str, Any]:
    since, until = _utc_naive(config.since), _utc_naive(config.until)
    window = f"add_time >= {sql_datetime(since)} AND add_time < {sql_datetime(until)}"
    keep = (F.col("add_time") >= F.lit(since)) & (F.col("add_time") < F.lit(until))
    messages = _messages(spark, config, where=window, keep=keep)
    # Events of a message never precede its production; only these events are counted.
    used = ", ".join(f"'{e}'" for e in trace.USED_EVENTS)
    traces = extract.union_unique(
        extract.live_traces(spark, config.source, where=f"at >= {sql_datetime(since)} AND event IN ({used})"),
        extract.archived(spark, config.archive_traces, TRACE_SCHEMA).where(
            (F.col("at") >= F.lit(since)) & F.col("event").isin(*trace.USED_EVENTS)
        ),
    )
    messages = _persisted(messages)
    events = _persisted(trace.traces_of(messages, traces).unionByName(trace.row_held(messages, traces)))
    try:
        total = messages.count()
        step(f"read {total} messages")
        events.count()
        step("read trace events")
        summary = load.rows(trace.trace_summary(messages, events), order=["topic", "group_name"])
        step("summary")
        attempts = load.rows(trace.attempts_distribution(messages), order=["topic", "group_name", "attempt"])
        step("attempts")
        reasons = load.rows(
            trace.failure_reasons(events, top=config.top_reasons),
            order=["topic", "group_name", "rank"],
        )
        step("failure reasons")
        consumers = load.rows(trace.consumer_load(events), order=["topic", "group_name", "consumer"])
        step("consumers")
    finally:
        messages.unpersist()
        events.unpersist()
    return {
        "kind": "trace",
        "since": since.isoformat(),
        "until": until.isoformat(),
        "messages": total,
        "groups": summary,
        "attempts": attempts,
        "reasons": reasons,
        "consumers": consumers,
    }


def run_heap_report(config: ReportConfig, progress: Progress | None = None) -> dict[str, Any]:
    """The heap report: backlog as of `until`, and the flow over [since, until)."""
    return _run(config, progress, 6, _heap)


def _heap(spark: SparkSession, config: ReportConfig, step: _Steps) -> dict[str, Any]:
    since, until = _utc_naive(config.since), _utc_naive(config.until)
    # Messages produced before `until` that are unfinished now or changed since `since`
    # (every change updates update_time): the others were finished all through the window.
    relevant = (
        f"(status IN ('NEW', 'RUNNING') OR add_time >= {sql_datetime(since)}"
        f" OR update_time >= {sql_datetime(since)}) AND add_time < {sql_datetime(until)}"
    )
    keep = ((F.col("add_time") >= F.lit(since)) | (F.col("update_time") >= F.lit(since))) & (
        F.col("add_time") < F.lit(until)
    )
    messages = _persisted(_messages(spark, config, where=relevant, keep=keep))
    persisted = [messages]
    try:
        least = messages.agg(F.min("id")).first()
        first = least[0] if least is not None else None
        step(f"read {messages.count()} messages")
        # Every event of these messages, of any time: the state as of `until` is the one
        # their last event before it left (a past window's end is not the state of today).
        lowest = int(first) if first is not None else 0
        traces = extract.union_unique(
            extract.live_traces(spark, config.source, where=f"message_id >= {lowest}"),
            extract.archived(spark, config.archive_traces, TRACE_SCHEMA).where(F.col("message_id") >= lowest),
        )
        events = _persisted(
            traces.join(messages.select(F.col("id").alias("message_id")), "message_id", "inner")
            .unionByName(trace.row_held(messages, traces).drop(*KEYS))
        )
        persisted.append(events)
        state = asof.state_as_of(messages, events, as_of=until)
        changes = asof.transitions(messages, events, since=since, until=until)
        prepared = asof.born_prepared(messages, events)
        flow_df = _persisted(heap.hourly_flow(messages, changes, prepared, since=since, until=until))
        persisted.append(flow_df)
        flow = load.rows(flow_df, order=["topic", "group_name", "hour"])
        step("hourly flow")
        summary_df = _persisted(heap.heap_summary(state, flow_df, as_of=until))
        persisted.append(summary_df)
        summary = load.rows(summary_df, order=["topic", "group_name"])
        step("summary")
        alarms = load.rows(heap.heap_alarms(summary_df, _thresholds(spark, config.thresholds)))
        step("alarms")
    finally:
        for df in persisted:
            df.unpersist()
    shown = {(row["topic"], row["group"]) for row in summary}
    flow = [row for row in flow if (row["topic"], row["group"]) in shown]
    return {
        "kind": "heap",
        "since": since.isoformat(),
        "until": until.isoformat(),
        "as_of": until.isoformat(),
        "groups": summary,
        "hourly": load.hourly_series(flow, since=since, until=until),
        "alarms": alarms,
        "thresholds": {topic: int(limit) for topic, limit in sorted(config.thresholds.items()) if limit},
    }


def _thresholds(spark: SparkSession, thresholds: dict[str, int]) -> DataFrame:
    """Thresholds as a DataFrame built from literals: no Python worker has to start."""
    rows = [
        F.struct(F.lit(topic).alias("topic"), F.lit(int(limit)).cast("long").alias("threshold"))
        for topic, limit in sorted(thresholds.items())
        if limit
    ]
    if not rows:
        return spark.range(0).select(F.lit("").alias("topic"), F.lit(0).cast("long").alias("threshold"))
    return spark.range(1).select(F.inline(F.array(*rows)))
