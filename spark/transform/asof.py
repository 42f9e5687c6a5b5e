"""A message's state at a past moment, rebuilt from its add time, its trace and the events its
row holds, and the moments it re-entered the heap.

A report whose window ends before the data was read must not show the state of the read:
messages produced or pulled since would count as waiting or running at the window's end.
Every change of status writes an event carrying the status after it (`status_after`), so
the state just before `as_of` is the status after the last event before it. The effect time
of a waiting message is the one its last event set: a retry or an expired lease logs
"retry at <time>", a consumer's snooze "snoozed until <time>" (both `retry_scheduled`
events), a release or a redrive makes it deliverable at once. A message whose row
has not changed since `as_of` is in that state still, row and all.

A message produced as half of a transaction (PREPARED: still so, with a "committed" event,
or cancelled before a commit) was not waiting before its commit: it starts PREPARED, not
NEW. One cancelled before its commit was never produced: it neither flows in nor out.

A copy (a replay's, an archive redrive's, a move's) keeps its original's add time but
entered the heap when it was made (`copied_at`): before then it was not there, and it has
waited since then at the earliest. `entered_at` is that moment for every message.

One gap: a message produced with a delay, still waiting at `as_of` and retried later, lost
its first effect time to the retry; it counts as deliverable from its add time.
"""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F

from spark.transform import KEYS

# Waiting or running: the heap. Every other status is finished (SUCCESS, the dead letters,
# CANCELLED) or not yet visible (PREPARED).
UNFINISHED = ("NEW", "RUNNING")
# Events after which a waiting message's effect time is no longer the one its row holds.
EFFECT_EVENTS = ("retry_scheduled", "lease_expired", "released", "redriven", "edited")
# A trace row's id orders events of the same instant; a pull held by the row (no id) is the
# newest pull of its message.
_LAST_ID = 2**62


def ordered(events: DataFrame) -> WindowSpec:
    return Window.partitionBy("message_id").orderBy(F.col("at"), F.coalesce(F.col("id"), F.lit(_LAST_ID)))


# The due time a retry, an expired lease or a snooze logs: "... retry at <ISO 8601>" or
# "snoozed until <ISO 8601>: <the consumer's log>" (the time alone, not the colon after it).
DUE_TIME = r"(?:retry at|snoozed until) (\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?)"


def retry_time(log: Column) -> Column:
    """The effect time a retry, an expired lease or a snooze logs."""
    text = F.regexp_extract(log, DUE_TIME, 1)
    return F.when(text != "", text.cast("timestamp"))


def entered_at() -> Column:
    """When a message entered the heap (unless produced PREPARED): its copy time for a copy,
    else its add time."""
    return F.coalesce(F.col("copied_at"), F.col("add_time"))


def state_as_of(messages: DataFrame, events: DataFrame, *, as_of: datetime) -> DataFrame:
    """Per message that entered before `as_of` (`entered_at`): topic, group, its status and
    effect time then.

    `events` are the message's events (trace rows and the pulls its row holds) of any time,
    with columns message_id, id, event, at, status_after, log.
    """
    moment = F.lit(as_of).cast("timestamp")
    prepared = born_prepared(messages, events).withColumn("prepared", F.lit(True))
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
        messages.where(entered_at() < moment)
        .join(last, messages["id"] == last["message_id"], "left").drop("message_id")
        .join(later, messages["id"] == later["message_id"], "left").drop("message_id")
        .join(prepared, messages["id"] == prepared["message_id"], "left").drop("message_id")
    )
    unchanged = F.col("changed").isNull()
    row_effect_kept = F.coalesce(F.col("effect_changed"), F.lit(0)) == 0
    status = (
        F.when(unchanged, F.col("status"))
        .when(F.col("last_status").isNull() & F.col("prepared").isNotNull(), F.lit("PREPARED"))
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
    # A copy was due at the earliest when it was made (its row may hold the original's time).
    effect = F.greatest(effect, F.coalesce(F.col("copied_at"), effect))
    return joined.select("id", *KEYS, "add_time", status.alias("status"), effect.alias("effect_time"))


# In the log of the `cancelled` event of a message cancelled while PREPARED
# (messages.states.PREPARED_CANCEL_LOG).
PREPARED_CANCEL_LOG = "cancelled while PREPARED, before its commit"


def born_prepared(messages: DataFrame, events: DataFrame) -> DataFrame:
    """Ids (`message_id`) of messages produced PREPARED (half of a transaction): still
    PREPARED, committed later, or cancelled before a commit."""
    committed = events.where(
        (F.col("event") == "committed")
        | ((F.col("event") == "cancelled") & F.col("log").contains(PREPARED_CANCEL_LOG))
    ).select("message_id")
    still = messages.where(F.col("status") == "PREPARED").select(F.col("id").alias("message_id"))
    return committed.unionByName(still).distinct()


def transitions(messages: DataFrame, events: DataFrame, *, since: datetime, until: datetime) -> DataFrame:
    """The moments in [since, until) a message entered or left the heap after it was
    produced: one row per change (message_id, at, direction "in" or "out").

    Every status change writes an event with the status after it, so a change is an event
    whose status is unfinished (NEW, RUNNING) where the one before was not, or the reverse:
    in by a redrive, requeue, commit or edit; out by an ack, a dead letter, an expiry, a
    cancel or an edit. Before its first event a message is NEW (or PREPARED, if produced
    so). A requeue of a waiting message, a nack that retries, an archive move nothing.
    """
    prepared = born_prepared(messages, events).withColumn("prepared", F.lit(True))
    first = F.when(F.col("prepared").isNotNull(), F.lit("PREPARED")).otherwise(F.lit("NEW"))
    before = F.coalesce(F.lag("status_after").over(ordered(events)), first)
    now_unfinished = F.col("status_after").isin(*UNFINISHED)
    was_unfinished = F.col("before").isin(*UNFINISHED)
    return (
        events.where(F.col("status_after").isNotNull())
        .join(prepared, "message_id", "left")
        .withColumn("before", before)
        .where((F.col("at") >= F.lit(since)) & (F.col("at") < F.lit(until)) & (now_unfinished != was_unfinished))
        .select("message_id", "at", F.when(now_unfinished, F.lit("in")).otherwise(F.lit("out")).alias("direction"))
    )
