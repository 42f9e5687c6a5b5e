"""A message's state at a past moment, rebuilt from its add time, its trace and the events its
row holds, and the moments it re-entered the heap.

A report whose window ends before the data was read must not show the state of the read:
messages produced or pulled since would count as waiting or running at the window's end.
Every change of status writes an event carrying the status after it (`status_after`), so
the state just before `as_of` is the status after the last event before it. The effect time
of a waiting message is the one its last event set: a retry or an expired lease logs
"retry at <time>", a release or a redrive makes it deliverable at once. A message whose row
has not changed since `as_of` is in that state still, row and all.

One gap: a message produced with a delay, still waiting at `as_of` and retried later, lost
its first effect time to the retry; it counts as deliverable from its add time.
"""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F

from spark.transform import KEYS

FINISHED = ("SUCCESS", "FAIL", "TIMEOUT")
# Events after which a waiting message's effect time is no longer the one its row holds.
EFFECT_EVENTS = ("retry_scheduled", "lease_expired", "released", "redriven", "edited")
# A trace row's id orders events of the same instant; a pull held by the row (no id) is the
# newest pull of its message.
_LAST_ID = 2**62


def ordered(events: DataFrame) -> WindowSpec:
    return Window.partitionBy("message_id").orderBy(F.col("at"), F.coalesce(F.col("id"), F.lit(_LAST_ID)))


def retry_time(log: Column) -> Column:
    """The effect time a retry or an expired lease logs ("... retry at <ISO 8601>")."""
    text = F.regexp_extract(log, r"retry at (\S+)", 1)
    return F.when(text != "", text.cast("timestamp"))


def state_as_of(messages: DataFrame, events: DataFrame, *, as_of: datetime) -> DataFrame:
    """Per message produced before `as_of`: topic, group, its status and effect time then.

    `events` are the message's events (trace rows and the pulls its row holds) of any time,
    with columns message_id, id, event, at, status_after, log.
    """
    moment = F.lit(as_of).cast("timestamp")
    before = events.where(F.col("at") < moment)
    last = (
        before.withColumn("n", F.row_number().over(
            Window.partitionBy("message_id").orderBy(
                F.col("at").desc(), F.coalesce(F.col("id"), F.lit(_LAST_ID)).desc())))
        .where(F.col("n") == 1)
        .select("message_id", F.col("event").alias("last_event"), F.col("at").alias("last_at"),
                F.col("status_after").alias("last_status"), F.col("log").alias("last_log"))
    )
    later = (
        events.where(F.col("at") >= moment)
        .groupBy("message_id")
        .agg(F.max(F.col("event").isin(*EFFECT_EVENTS).cast("int")).alias("effect_changed"))
        .withColumn("changed", F.lit(True))
    )
    joined = (
        messages.where(F.col("add_time") < moment)
        .join(last, messages["id"] == last["message_id"], "left").drop("message_id")
        .join(later, messages["id"] == later["message_id"], "left").drop("message_id")
    )
    unchanged = F.col("changed").isNull()
    row_effect_kept = F.coalesce(F.col("effect_changed"), F.lit(0)) == 0
    status = (
        F.when(unchanged, F.col("status"))
        .when(F.col("last_status").isNull(), F.lit("NEW"))
        .otherwise(F.col("last_status"))
    )
    effect = (
        F.when(unchanged, F.col("effect_time"))
        .when(F.col("last_event").isin("retry_scheduled", "lease_expired"),
              F.coalesce(retry_time(F.col("last_log")), F.col("last_at")))
        .when(F.col("last_event").isin("released", "redriven"), F.col("last_at"))
        .when(row_effect_kept, F.col("effect_time"))
        .otherwise(F.coalesce(F.col("last_at"), F.col("add_time")))
    )
    return joined.select("id", *KEYS, "add_time", status.alias("status"), effect.alias("effect_time"))


def reentries(events: DataFrame, *, since: datetime, until: datetime) -> DataFrame:
    """Messages that became unfinished again in [since, until): a redrive or requeue of a
    finished message (one of a waiting message moves nothing). One row per re-entry, with
    message_id and at."""
    previous = F.lag("status_after").over(ordered(events))
    return (
        events.where(F.col("status_after").isNotNull())
        .withColumn("before", previous)
        .where((F.col("event") == "redriven") & F.col("before").isin(*FINISHED)
               & (F.col("at") >= F.lit(since)) & (F.col("at") < F.lit(until)))
        .select("message_id", "at")
    )
