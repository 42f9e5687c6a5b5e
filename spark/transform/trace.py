"""The trace report: what happened to the messages produced in a window, per topic and group.

Inputs are `messages` (one row per message produced in the window) and `events`: their trace
events carrying topic and group (`traces_of(messages, traces)`). Every function is pure.
"""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from spark.transform import KEYS, percentile_columns, seconds_between

STATUSES = ("SUCCESS", "FAIL", "TIMEOUT", "EXPIRED", "CANCELLED", "NEW", "RUNNING", "PREPARED")
FINISH_EVENTS = ("acked", "nacked")
# The events the trace report reads; the others (produced, edited, ...) change no figure.
USED_EVENTS = ("pulled", "acked", "nacked", "lease_expired", "released")
NO_REASON = "(no reason given)"
REASON_CHARS = 200


def produced_between(messages: DataFrame, *, since: datetime, until: datetime) -> DataFrame:
    """The messages produced in [since, until)."""
    return messages.where((F.col("add_time") >= F.lit(since)) & (F.col("add_time") < F.lit(until)))


def traces_of(messages: DataFrame, traces: DataFrame) -> DataFrame:
    """Trace events of `messages`, carrying their topic and group."""
    keys = messages.select(F.col("id").alias("message_id"), *KEYS)
    return traces.join(keys, on="message_id", how="inner")


def row_pulls(messages: DataFrame) -> DataFrame:
    """The "pulled" events message rows hold, which no trace row does: the pull of the
    delivery a claim leased the message for (`pulled_at`, by its lease_owner, in its
    attempt). Shaped as `traces_of` answers (no event id)."""
    return messages.where(F.col("pulled_at").isNotNull()).select(
        F.lit(None).cast("long").alias("id"),
        F.col("id").alias("message_id"),
        F.lit("pulled").alias("event"),
        F.col("lease_owner").alias("actor"),
        F.col("pulled_at").alias("at"),
        F.col("attempt").cast("int").alias("attempt"),
        F.lit("RUNNING").alias("status_after"),
        F.lit("").alias("log"),
        *KEYS,
    )


def row_acks(messages: DataFrame, traces: DataFrame) -> DataFrame:
    """The "acked" events message rows hold, which no trace row does: a success on the
    first delivery with its pull still on the row (messages/delivery/trace.py,
    `holds_ack`), by its lease_owner at its update_time, unless `traces` hold that ack (an
    ack written before rows held acks). Shaped as `row_pulls`."""
    traced = traces.where((F.col("event") == "acked") & (F.col("attempt") == 1)).select("message_id").distinct()
    held = messages.where(
        (F.col("status") == "SUCCESS") & (F.col("attempt") == 1) & F.col("pulled_at").isNotNull()
    )
    return held.join(traced, held["id"] == traced["message_id"], "left_anti").select(
        F.lit(None).cast("long").alias("id"),
        F.col("id").alias("message_id"),
        F.lit("acked").alias("event"),
        F.col("lease_owner").alias("actor"),
        F.col("update_time").alias("at"),
        F.col("attempt").cast("int").alias("attempt"),
        F.lit("SUCCESS").alias("status_after"),
        F.lit("").alias("log"),
        *KEYS,
    )


def row_held(messages: DataFrame, traces: DataFrame) -> DataFrame:
    """Every event message rows hold (`row_pulls`, `row_acks`), `traces` their trace rows."""
    return row_pulls(messages).unionByName(row_acks(messages, traces))


def trace_summary(messages: DataFrame, events: DataFrame) -> DataFrame:
    """One row per topic and group: outcomes, attempts, latency and processing percentiles,
    lease expiries.

    Latency is produce -> success: the last `acked` event minus the message's add_time, for
    messages whose final status is SUCCESS. Processing time is pull -> ack/nack of one
    delivery (the same message and attempt).
    """
    base = messages.groupBy(*KEYS).agg(
        F.count("*").alias("messages"),
        *[F.sum(F.when(F.col("status") == s, 1).otherwise(0)).alias(s.lower()) for s in STATUSES],
        F.avg("attempt").alias("attempts_avg"),
        F.max("attempt").alias("attempts_max"),
        F.sum(F.when(F.col("attempt") > 1, 1).otherwise(0)).alias("retried"),
    )
    acked_at = (
        events.where(F.col("event") == "acked").groupBy("message_id").agg(F.max("at").alias("acked_at"))
    )
    latency = (
        messages.where(F.col("status") == "SUCCESS")
        .join(acked_at, messages["id"] == acked_at["message_id"], "inner")
        .select(*KEYS, seconds_between("acked_at", "add_time").alias("latency"))
        .groupBy(*KEYS)
        .agg(*percentile_columns("latency", "latency"))
    )
    processing = (
        deliveries(events).groupBy(*KEYS).agg(*percentile_columns("processing", "processing"))
    )
    expiries = (
        events.where(F.col("event") == "lease_expired").groupBy(*KEYS).agg(F.count("*").alias("lease_expiries"))
    )
    return (
        base.join(latency, KEYS, "left")
        .join(processing, KEYS, "left")
        .join(expiries, KEYS, "left")
        .fillna({"lease_expiries": 0})
    )


def deliveries(events: DataFrame) -> DataFrame:
    """One row per finished delivery: the ack or nack with its consumer and processing time
    (seconds since the pull of the same attempt)."""
    pulls = (
        events.where(F.col("event") == "pulled")
        .groupBy("message_id", "attempt")
        .agg(F.max("at").alias("pulled_at"))
    )
    return (
        events.where(F.col("event").isin(*FINISH_EVENTS))
        .join(pulls, ["message_id", "attempt"], "inner")
        .where(F.col("pulled_at") <= F.col("at"))
        .select(*KEYS, "message_id", "event", "actor", seconds_between("at", "pulled_at").alias("processing"))
    )


def attempts_distribution(messages: DataFrame) -> DataFrame:
    """How many messages took 0, 1, 2, ... deliveries, per topic and group."""
    return messages.groupBy(*KEYS, "attempt").agg(F.count("*").alias("messages"))


def reason_of(log_column: str) -> Column:
    """A failure reason: the first line of the consumer's log, trimmed and bounded."""
    first_line = F.trim(F.substring_index(F.coalesce(F.col(log_column), F.lit("")), "\n", 1))
    return F.when(first_line == "", F.lit(NO_REASON)).otherwise(F.substring(first_line, 1, REASON_CHARS))


def failure_reasons(events: DataFrame, *, top: int = 5) -> DataFrame:
    """The `top` most frequent failure reasons (nack logs) per topic and group, ranked."""
    counted = (
        events.where(F.col("event") == "nacked")
        .select(*KEYS, reason_of("log").alias("reason"))
        .groupBy(*KEYS, "reason")
        .agg(F.count("*").alias("failures"))
    )
    rank = Window.partitionBy(*KEYS).orderBy(F.col("failures").desc(), F.col("reason"))
    return counted.withColumn("rank", F.row_number().over(rank)).where(F.col("rank") <= top)


def consumer_load(events: DataFrame) -> DataFrame:
    """Load and failure rate per consumer instance.

    deliveries: pulls (each hand-off or claim of a message to the consumer); released: of
    those, handed back unstarted (no attempt spent); attempts: deliveries - released;
    acked, nacked: its answers; expired: its deliveries whose lease ran out (the broker
    writes the expiry; it is blamed on the consumer whose pull it ended); failure_rate:
    (nacked + expired) / (acked + nacked + expired), null before any attempt ended.
    Deliveries still running count in deliveries and attempts only.
    """
    order = Window.partitionBy("message_id").orderBy(F.col("at"), F.coalesce(F.col("id"), F.lit(2**62)))
    holder = F.last(F.when(F.col("event") == "pulled", F.col("actor")), ignorenulls=True).over(order)
    blamed = events.withColumn(
        "consumer", F.when(F.col("event") == "lease_expired", holder).otherwise(F.col("actor"))
    )

    def count(event: str) -> Column:
        return F.sum(F.when(F.col("event") == event, 1).otherwise(0))

    counts = (
        blamed.where(F.col("event").isin("pulled", "released", "lease_expired", *FINISH_EVENTS)
                     & F.col("consumer").isNotNull())
        .groupBy(*KEYS, "consumer")
        .agg(count("pulled").alias("deliveries"), count("released").alias("released"),
             count("acked").alias("acked"), count("nacked").alias("nacked"),
             count("lease_expired").alias("expired"))
        .withColumn("attempts", F.col("deliveries") - F.col("released"))
    )
    processing = (
        deliveries(events)
        .groupBy(*KEYS, F.col("actor").alias("consumer"))
        .agg(*percentile_columns("processing", "processing")[:1])
    )
    ended = F.col("acked") + F.col("nacked") + F.col("expired")
    return counts.join(processing, [*KEYS, "consumer"], "left").withColumn(
        "failure_rate", F.when(ended > 0, (F.col("nacked") + F.col("expired")) / ended)
    )
