"""A message's states and the events of its trace: the words every part of the broker
shares. No Django model here, so the tables of every slice can use them."""

from __future__ import annotations

from django.db import models


class Status(models.TextChoices):
    NEW = "NEW"
    RUNNING = "RUNNING"
    SUCCESS = "SUCCESS"
    FAIL = "FAIL"
    TIMEOUT = "TIMEOUT"
    EXPIRED = "EXPIRED"  # not delivered before its expiry: a dead letter
    PREPARED = "PREPARED"  # half of an open transaction: stored, never claimed (claims take NEW)
    CANCELLED = "CANCELLED"  # withdrawn before delivery: finished, not a dead letter


DEFAULT_PRIORITY = 4
MAX_PRIORITY = 9
# Readers of a group's NEW rows in time order read one range of ix_msg_priority per level.
PRIORITY_LEVELS = tuple(range(MAX_PRIORITY + 1))

DEAD_STATUSES = (Status.FAIL, Status.TIMEOUT, Status.EXPIRED)
FINISHED_STATUSES = (Status.SUCCESS, Status.FAIL, Status.TIMEOUT, Status.EXPIRED, Status.CANCELLED)


class TraceEvent(models.TextChoices):
    PRODUCED = "produced"
    PULLED = "pulled"
    ACKED = "acked"
    NACKED = "nacked"
    RETRY_SCHEDULED = "retry_scheduled"
    DEAD = "dead"
    LEASE_EXPIRED = "lease_expired"
    EXTENDED = "extended"
    RELEASED = "released"
    STALE_ACK = "stale_ack"
    EDITED = "edited"
    REDRIVEN = "redriven"
    ARCHIVED = "archived"
    COMMITTED = "committed"
    CANCELLED = "cancelled"
    MOVED = "moved"  # to another topic/group: on the original and on its copy


# In the log of the `cancelled` event of a message cancelled while PREPARED (before its
# transaction's commit): it was never produced. The reports read it (spark/transform/asof.py).
PREPARED_CANCEL_LOG = "cancelled while PREPARED, before its commit"
