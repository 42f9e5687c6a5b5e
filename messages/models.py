"""Messages and their trace: the tables of the delivery core.

The hot table `mq_message` holds live messages. Its indexes are designed for the claim path:
every claim query filters and orders exactly along one of them, so a pull stays as fast with
millions of finished rows as with none. Each capability's own tables are in its sub-package's
`models.py`, imported at the end of this module so that the app registers them.
"""

from __future__ import annotations

from django.db import models

from messages.states import (  # noqa: F401 - the vocabulary, read as messages.models.Status
    DEAD_STATUSES,
    DEFAULT_PRIORITY,
    FINISHED_STATUSES,
    MAX_PRIORITY,
    PRIORITY_LEVELS,
    Status,
    TraceEvent,
)


class Message(models.Model):
    id = models.BigAutoField(primary_key=True)
    topic = models.CharField(max_length=200)
    group_name = models.CharField(max_length=200, default="default")
    # The JSON text exactly as produced: stored and returned without re-interpretation.
    data = models.TextField()
    # NULL, not "", means "no key": sharded mode treats keyless messages as plain queue ones.
    key = models.CharField(max_length=128, null=True, blank=True, db_column="msg_key")  # noqa: DJ001
    headers = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.NEW)
    effect_time = models.DateTimeField()
    retry_remaining = models.IntegerField(default=0)
    attempt = models.IntegerField(default=0)
    timeout_seconds = models.IntegerField(default=60)
    # NULL keeps messages without a dedup key out of the unique (topic, group, dedup_key) index.
    dedup_key = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    lease_owner = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    last_log = models.TextField(blank=True, default="")
    add_time = models.DateTimeField()
    update_time = models.DateTimeField()
    # Who produced it (the token's name). With `add_time` this is the message's "produced"
    # trace event, which is not written as a trace row of its own (a third fewer trace rows).
    producer = models.CharField(max_length=200, default="")
    # When a claim leased the message for its current delivery, and the pulling consumer's
    # rank/total: with `lease_owner` and `attempt` this is that delivery's "pulled" trace
    # event, held by the row instead of a trace row (see messages/delivery/lifecycle.py).
    # NULL when the row holds no pull.
    pulled_at = models.DateTimeField(null=True, blank=True)
    pulled_rank = models.IntegerField(null=True, blank=True)
    pulled_total = models.IntegerField(null=True, blank=True)
    # The publish this row is a copy of: one random number shared by every group's copy of a
    # message produced without a group (and by replayed copies of it). A replay takes one
    # copy per publish. NULL for a point-to-point message (produced to one named group).
    publish_id = models.BigIntegerField(null=True, blank=True)
    # 0-9: a queue claim delivers a group's higher priorities first (serial and sharded
    # groups keep id order).
    # A database default too: rows written by other tools (bulk loads, SQL) need not name it.
    # 0-9 (MAX_PRIORITY), as produce checks: readers in time order read one index range per
    # level (delivery/sql.py), so a row written with another value is never their candidate.
    priority = models.SmallIntegerField(default=DEFAULT_PRIORITY, db_default=DEFAULT_PRIORITY)
    # Not delivered by then: EXPIRED (a dead letter), set by the claim or the expiry sweep.
    expires_at = models.DateTimeField(null=True, blank=True)
    # A copy (a replay's, an archive redrive's or a move's): when it was made. It keeps the
    # original's add_time; backlogs and reports count it from here. NULL for a produce.
    copied_at = models.DateTimeField(null=True, blank=True)
    # One short label a group's subscription filter may select on (messages/routing/).
    tag = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001 - NULL: no tag
    # The batch this message belongs to (messages/batches/): its finish counts towards it.
    batch_id = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001 - NULL: none
    # `dedup_key` is unique until then only (messages/delivery/dedup.py); NULL: while the row is kept.
    dedup_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "mq_message"
        # An index whose readers order by id after its columns names `id` last. InnoDB and
        # SQLite append the primary key to every index entry anyway; PostgreSQL does not, and
        # without it sorts the whole range on each read (a claim on a backlog of 60,000-100,000:
        # 39-62 ms against 0.1, messages migration 0013).
        indexes = [
            # queue claims: WHERE topic, group, status='NEW', effect_time <= now ORDER BY
            # priority DESC, effect_time, id (InnoDB appends the primary key). Finished rows
            # lie outside the (topic, group, 'NEW') prefix; delayed ones inside it are
            # skipped on the index entry (index condition on effect_time). Readers that want
            # a group's NEW rows in (effect_time, id) order whatever their priority (the next
            # delayed message, the sharded claim, the scheduled list, counts by effect_time)
            # read one range per priority level (messages/delivery/sql.py, `in_time_order`):
            # a second index in that order would be rewritten by every claim and ack too.
            models.Index(fields=["topic", "group_name", "status", "-priority", "effect_time", "id"], name="ix_msg_priority"),
            # serial claims and backlog ordering: the lowest id of a group in a status.
            models.Index(fields=["topic", "group_name", "status", "id"], name="ix_msg_order"),
            # sharded claims (head of a key) and key search with or without a topic. On
            # MySQL/MariaDB it holds the generated `key_status` in place of `status` (migration
            # 0011: the status of a message with a key, NULL without one), so the claim and the
            # ack of a message without a key leave its entry alone.
            models.Index(fields=["key", "topic", "group_name", "status"], name="ix_msg_key"),
            # fair queue claims (claims/fair.py): the next keys with due NEW messages, a
            # loose scan that jumps key to key, and the oldest due rows of each key.
            models.Index(fields=["topic", "group_name", "status", "key", "effect_time", "id"], name="ix_msg_fair"),
            # status filters in keyset (id) order; lease recovery reads the few RUNNING rows.
            models.Index(fields=["status", "id"], name="ix_msg_status"),
            # topic filters in keyset order (console and search without a group).
            models.Index(fields=["topic", "id"], name="ix_msg_topic"),
            # the expiry sweep: NEW rows whose expires_at has passed (NULLs sort first, so
            # messages without an expiry are outside the range). On MySQL/MariaDB it holds the
            # generated `expiry_status` in place of `status` (migration 0011: NULL for a message
            # without an expiry, whose claim and ack then leave its entry alone).
            models.Index(fields=["status", "expires_at"], name="ix_msg_expiry"),
            # the stats flush's successes held by their rows: SUCCESS rows in (update_time,
            # id) order after its watermark (messages/stats/row_acks.py).
            models.Index(fields=["status", "update_time", "id"], name="ix_msg_finished"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["topic", "group_name", "dedup_key"], name="uq_msg_dedup"
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.id} {self.topic}/{self.group_name} {self.status}"


class MessageTrace(models.Model):
    """One event in a message's life, written in the transaction of the change it describes."""

    id = models.BigAutoField(primary_key=True)
    message_id = models.BigIntegerField()
    event = models.CharField(max_length=24, choices=TraceEvent.choices)
    actor = models.CharField(max_length=200, blank=True, default="")
    at = models.DateTimeField()
    attempt = models.IntegerField(default=0)
    rank = models.IntegerField(null=True, blank=True)
    total = models.IntegerField(null=True, blank=True)
    status_after = models.CharField(max_length=16, blank=True, default="")
    log = models.TextField(blank=True, default="")

    class Meta:
        db_table = "mq_message_trace"
        indexes = [models.Index(fields=["message_id", "id"], name="ix_trace_message")]

    def __str__(self) -> str:
        return f"#{self.message_id} {self.event} by {self.actor}"


# Each capability's tables, imported so the app registers them.
from messages.alarms.models import Alarm  # noqa: E402, F401
from messages.archive.models import ArchiveExport, MessageArchive  # noqa: E402, F401
from messages.batches.models import Batch  # noqa: E402, F401
from messages.maintenance.models import MaintenanceRun  # noqa: E402, F401
from messages.operations.models import BulkJob  # noqa: E402, F401
from messages.schedules.models import Schedule  # noqa: E402, F401
from messages.stats.models import StatsBucket  # noqa: E402, F401
from messages.transactions.models import Transaction  # noqa: E402, F401
