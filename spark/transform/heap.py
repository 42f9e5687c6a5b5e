"""The heap (accumulation) report: where messages pile up, per topic and group.

Inputs are `messages` (messages not finished, plus any message produced or updated since the
window's start, live or archived) and their events. Pure functions.
"""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark.transform import KEYS, asof, seconds_between

TREND_BAND = 0.01


def hourly_flow(
    messages: DataFrame, changes: DataFrame, prepared: DataFrame, *, since: datetime, until: datetime
) -> DataFrame:
    """Inflow and outflow per topic, group and hour of the window.

    Inflow: messages that became unfinished: produced, or a copy when it was made
    (`asof.entered_at`; not one produced PREPARED, ids in `prepared`: those enter when
    committed), or back in the heap after they had finished (`changes` "in",
    `asof.transitions`); outflow: messages that finished (`changes` "out").
    A redriven message that fails again thus flows in and out twice, and the flow balances
    the heap's change.
    """
    keys = messages.select(F.col("id").alias("message_id"), *KEYS)
    entered = messages.withColumn("at", asof.entered_at())
    produced = (
        entered.where((F.col("at") >= F.lit(since)) & (F.col("at") < F.lit(until)))
        .join(prepared, entered["id"] == prepared["message_id"], "left_anti")
        .select(*KEYS, "at")
    )
    moved = changes.join(keys, "message_id", "inner")
    came = produced.unionByName(moved.where(F.col("direction") == "in").select(*KEYS, "at"))
    inflow = came.groupBy(*KEYS, F.date_trunc("hour", "at").alias("hour")).agg(F.count("*").alias("inflow"))
    outflow = (
        moved.where(F.col("direction") == "out")
        .groupBy(*KEYS, F.date_trunc("hour", "at").alias("hour"))
        .agg(F.count("*").alias("outflow"))
    )
    return inflow.join(outflow, [*KEYS, "hour"], "full").fillna({"inflow": 0, "outflow": 0})


def heap_summary(state: DataFrame, flow: DataFrame, *, as_of: datetime) -> DataFrame:
    """One row per topic and group with anything waiting, running or flowing: the heap as of
    `as_of`, flow rates, growth trend and estimated time to drain.

    `state` is each message's status and effect time as of `as_of` (`asof.state_as_of`).
    backlog: NEW and deliverable (effect_time <= as_of); delayed: NEW, not yet deliverable.
    oldest_age_seconds: how long the oldest deliverable message had been waiting since it
    became deliverable. Rates are per active hour: an hour of the window in which the group
    had inflow or outflow, so a burst is not diluted by idle hours. drain_hours: backlog /
    (outflow - inflow) per active hour; 0 without a backlog, null when the backlog does not
    shrink. trend: growing or shrinking when in and out differ by more than 1% of the
    larger, else steady.
    """
    deliverable = (F.col("status") == "NEW") & (F.col("effect_time") <= F.lit(as_of))
    heap = state.groupBy(*KEYS).agg(
        F.sum(F.when(deliverable, 1).otherwise(0)).alias("backlog"),
        F.sum(F.when((F.col("status") == "NEW") & ~deliverable, 1).otherwise(0)).alias("delayed"),
        F.sum(F.when(F.col("status") == "RUNNING", 1).otherwise(0)).alias("running"),
        F.min(F.when(deliverable, F.col("effect_time"))).alias("oldest_effect_time"),
    )
    totals = flow.groupBy(*KEYS).agg(
        F.sum("inflow").alias("inflow"),
        F.sum("outflow").alias("outflow"),
        F.sum(F.when((F.col("inflow") + F.col("outflow")) > 0, 1).otherwise(0)).alias("active_hours"),
    )
    hours = F.col("active_hours")

    def per_hour(column: Column) -> Column:
        return F.when(hours > 0, column / hours).otherwise(F.lit(0.0))

    joined = (
        heap.join(totals, KEYS, "full")
        .fillna({"backlog": 0, "delayed": 0, "running": 0, "inflow": 0, "outflow": 0, "active_hours": 0})
        .where((F.col("backlog") + F.col("delayed") + F.col("running") + F.col("inflow") + F.col("outflow")) > 0)
        .withColumn("as_of", F.lit(as_of).cast("timestamp"))
        .withColumn("oldest_age_seconds", seconds_between("as_of", "oldest_effect_time"))
        .withColumn("inflow_per_hour", per_hour(F.col("inflow")))
        .withColumn("outflow_per_hour", per_hour(F.col("outflow")))
        .withColumn("growth_per_hour", per_hour(F.col("inflow") - F.col("outflow")))
    )
    net_drain = F.col("outflow_per_hour") - F.col("inflow_per_hour")
    # Within 1% of the traffic, in and out balance: "steady", not a trend.
    band = F.greatest(F.col("inflow_per_hour"), F.col("outflow_per_hour")) * TREND_BAND
    return (
        joined.withColumn(
            "trend",
            F.when(F.col("growth_per_hour") > band, "growing")
            .when(F.col("growth_per_hour") < -band, "shrinking")
            .otherwise("steady"),
        )
        .withColumn(
            "drain_hours",
            F.when(F.col("backlog") == 0, F.lit(0.0)).when(net_drain > 0, F.col("backlog") / net_drain),
        )
        .drop("as_of", "oldest_effect_time")
    )


def heap_alarms(summary: DataFrame, thresholds: DataFrame) -> DataFrame:
    """Groups whose backlog reached their topic's alarm threshold, most over first.

    `thresholds` has columns topic, threshold (topics without a threshold are absent).
    """
    return (
        summary.join(thresholds, "topic", "inner")
        .where(F.col("backlog") >= F.col("threshold"))
        .withColumn("ratio", F.col("backlog") / F.col("threshold"))
        .select(*KEYS, "backlog", "threshold", "ratio", "oldest_age_seconds", "trend")
        .orderBy(F.col("ratio").desc(), *KEYS)
    )
