"""Counting the successes whose "acked" event only their message row holds.

A success on the first delivery writes no trace row: its row says it all (status SUCCESS,
attempt 1, `lease_owner` the consumer, `update_time` the ack, `pulled_at` set; see
`messages.delivery.trace.holds_ack`). Every other ack writes an "acked" trace row. So the
flush counts successes from three places, each ack in exactly one:

- "acked" trace rows (`flush._flush_batch`), except those of attempt 1 with no log: those
  are held acks written out later (`acks_written_out`), never counted from the trace. Up
  to `acked_trace_floor` (the last trace id when rows began to hold acks, set by migration
  0009, which also starts the watermark below after every earlier success) such a row is
  the ack itself, and counts;
- rows that hold their ack, in (update_time, id) order after a watermark kept beside the
  others in the flush's `MaintenanceRun` row (`acked_time`, `acked_id`), read from the hot
  table and then from the archive (a message archived before the flush reached it still
  counts once: read in that order, a row moved between the two reads is seen twice and
  counted once, never missed);
- a held ack that a change is about to overwrite (an edit, a requeue) before the flush
  reached it: counted by that change, under the flush lock (`acks_written_out`).

Like the trace flush, only rows older than SETTLE_SECONDS are read: an ack's transaction
commits within that after its `update_time`. Everything runs under the flush lock, so
several broker processes take turns and a crash rolls the counts and the watermark back
together.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q

from messages.archive.models import MessageArchive
from messages.maintenance.models import MaintenanceRun
from messages.models import Message, Status
from messages.stats.buckets import buckets_add, minute_of, no_deltas

SETTLE_SECONDS = 2.0
_FIELDS = ("update_time", "id", "topic", "group_name")


def held_acks_after(model: Any, state: MaintenanceRun, settled: datetime) -> Any:
    """`model`'s rows holding their ack, after the watermark and settled, oldest first: a
    range of the (status, update_time) index, read in its order (InnoDB appends the id)."""
    rows = model.objects.filter(status=Status.SUCCESS, attempt=1, pulled_at__isnull=False,
                                update_time__lte=settled)
    if state.acked_time is not None:
        rows = rows.filter(update_time__gte=state.acked_time).exclude(
            Q(update_time=state.acked_time) & Q(id__lte=state.acked_id))
    return rows.order_by("update_time", "id").values_list(*_FIELDS)


def flush_row_acks_batch(*, now: datetime, batch: int) -> tuple[int, bool]:
    """Count one batch of held acks into the buckets and move the watermark."""
    settled = now - timedelta(seconds=SETTLE_SECONDS)
    with transaction.atomic():
        state = MaintenanceRun.objects.select_for_update().get(job="flush")
        live = list(held_acks_after(Message, state, settled)[:batch])
        archived = list(held_acks_after(MessageArchive, state, settled)[:batch])  # after the hot table: see above
        taken = sorted({row[1]: row for row in [*live, *archived]}.values())[:batch]
        if not taken:
            return 0, False
        deltas = no_deltas()
        for update_time, _id, topic, group in taken:
            deltas[(topic, group, minute_of(update_time))]["succeeded"] += 1
        buckets_add(deltas)
        MaintenanceRun.objects.filter(pk=state.pk).update(acked_time=taken[-1][0], acked_id=taken[-1][1])
    return len(taken), len(taken) == batch


def acks_written_out(held: Iterable[Any]) -> None:
    """Count the held acks (messages that hold theirs, locked by the caller's transaction)
    that a change is about to write out as trace rows, if the flush has not counted them yet.
    Takes the flush lock until the caller commits, so the flush sees the change after it."""
    held = list(held)
    if not held:
        return
    MaintenanceRun.objects.get_or_create(job="flush")
    state = MaintenanceRun.objects.select_for_update().get(job="flush")
    mark = (state.acked_time, state.acked_id)
    deltas = no_deltas()
    for message in held:
        if mark[0] is None or (message.update_time, message.id) > mark:
            deltas[(message.topic, message.group_name, minute_of(message.update_time))]["succeeded"] += 1
    buckets_add(deltas)
