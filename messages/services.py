"""One message's operator actions: find it (within the caller's reach), edit it, add one
from the console, cancel it.

Each action is audited (who, what, before/after) and traced on the message, in the same
transaction as the change. Editing a RUNNING message takes its lease away, so the
consumer's late ack is answered `stale`. Actions on many messages at once (requeue, redrive,
delete, cancel by ids or filter, bulk jobs) are in messages/operations/bulk.py.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from messages.batches.progress import batches_finished
from messages.delivery.produce import ProduceItem, ProduceResult, messages_produce
from messages.delivery.trace import row_acks_write, trace_row, trace_write
from messages.delivery.validation import data_size_check
from messages.models import Message, Status, TraceEvent
from messages.states import PREPARED_CANCEL_LOG
from messages.stats.live import live_moved
from mqcenter.core.audit import audit_record
from mqcenter.core.auth import Principal
from mqcenter.core.errors import Conflict, InvalidRequest, NotFound
from registry.wakeups import wakeup_hub
from topics.models import Topic
from topics.services import DEFAULT_GROUP, topic_is_deleting

EDITABLE_STATUSES = (Status.NEW, Status.SUCCESS, Status.FAIL, Status.TIMEOUT)
# Not yet running and not finished: a waiting (possibly delayed) message, or half of an
# open transaction (whose later commit then leaves it cancelled: it only takes PREPARED rows).
CANCELLABLE_STATUSES = (Status.NEW, Status.PREPARED)


def message_get(*, principal: Principal, message_id: int, for_update: bool = False) -> Message:
    rows = Message.objects.select_for_update() if for_update else Message.objects
    message = rows.filter(id=message_id).first()
    if message is None:
        raise NotFound(f"Message {message_id} does not exist.", details={"id": message_id})
    topic = Topic.objects.filter(name=message.topic).first()
    # Another line's message answers exactly as a missing one.
    if (topic is not None and not principal.may_biz(topic.biz_id)) or (
        topic is None and (principal.biz_ids is not None or topic_is_deleting(message.topic))
    ):
        raise NotFound(f"Message {message_id} does not exist.", details={"id": message_id})
    return message


def message_snapshot(message: Message) -> dict[str, Any]:
    return {
        "data": message.data,
        "status": message.status,
        "effect_time": message.effect_time.isoformat(),
        "retry_remaining": message.retry_remaining,
    }


def message_edit(*, principal: Principal, message_id: int, changes: dict[str, Any]) -> Message:
    """Change data (JSON text), status, effect_time or retry_remaining of one message."""
    if "data" in changes:
        data_size_check(changes["data"], "data")
    if "status" in changes and changes["status"] not in EDITABLE_STATUSES:
        raise InvalidRequest(
            f"status may be set to {', '.join(EDITABLE_STATUSES)}.", details={"field": "status"}
        )
    now = timezone.now()
    with transaction.atomic():
        message = message_get(principal=principal, message_id=message_id, for_update=True)
        before = message_snapshot(message)
        status_before = message.status
        row_acks_write([message])  # before its status or update_time change (saved below)
        for field in ("data", "status", "effect_time", "retry_remaining"):
            if field in changes:
                setattr(message, field, changes[field])
        if before["status"] == Status.RUNNING:
            message.lease_expires_at = None  # the holder's ack will now be stale
            if "status" not in changes:
                message.status = Status.NEW
        message.update_time = now
        message.save()
        after = message_snapshot(message)
        changed = sorted(k for k in after if after[k] != before[k])
        trace_write([trace_row(message, TraceEvent.EDITED, at=now, actor=principal.name,
                               log="changed " + ", ".join(changed) if changed else "no change")])
        audit_record(actor=principal.name, action="message.edit", target=message, before=before, after=after)
        live_moved([(message.topic, message.group_name, status_before, message.status)])
        if message.status == Status.NEW:
            pair = (message.topic, message.group_name)
            transaction.on_commit(lambda: wakeup_hub().publish([pair]))
    return message


def message_add(*, principal: Principal, item: Any) -> Any:
    """An operator adds one message (console): produced exactly like an API produce, then
    audited. The audit row follows the produce's commit (produce owns its transaction)."""
    result = messages_produce(principal=principal, items=[item])[0]
    audit_record(actor=principal.name, action="message.add", target="Message", target_id=result.id,
                 target_name=f"message {result.id} ({result.topic}/{result.group})",
                 after={"id": result.id, "topic": result.topic, "group": result.group, "duplicate": result.duplicate})
    return result


def message_cancel(*, principal: Principal, message_id: int) -> Message:
    """Withdraw one message that is NEW (delayed or not) or PREPARED: it becomes CANCELLED,
    a finished status kept for retention, not a dead letter. A running or finished
    message answers 409."""
    message = message_get(principal=principal, message_id=message_id)
    if message.status == Status.CANCELLED:  # a repeated cancel (a retried request) is harmless
        return message
    with transaction.atomic():
        cancelled = messages_cancel_rows(principal, Message.objects.filter(id=message_id))
        if cancelled:
            audit_record(actor=principal.name, action="message.cancel", target=message)
    if not cancelled:
        current = Message.objects.filter(id=message_id).values_list("status", flat=True).first()
        raise Conflict(
            f"Message {message_id} is {current}: only NEW or PREPARED messages can be cancelled.",
            details={"id": message_id, "status": current},
        )
    message.refresh_from_db()
    return message


def messages_cancel_rows(principal: Principal, rows) -> int:  # type: ignore[no-untyped-def]
    """Cancel the rows of `rows` that are still NEW or PREPARED, under their row locks; the
    count cancelled. Shared by the single cancel and the bulk one."""
    now = timezone.now()
    with transaction.atomic():
        # Locked, then changed only if still waiting: a claim may have taken one meanwhile
        # (SKIP LOCKED claims pass over the rows locked here).
        messages = list(rows.filter(status__in=CANCELLABLE_STATUSES).select_for_update().order_by("id"))
        if not messages:
            return 0
        live_moved((m.topic, m.group_name, m.status, Status.CANCELLED) for m in messages)
        Message.objects.filter(id__in=[m.id for m in messages]).update(
            status=Status.CANCELLED, lease_expires_at=None, update_time=now
        )
        logs = {m.id: PREPARED_CANCEL_LOG if m.status == Status.PREPARED else "" for m in messages}
        for message in messages:
            message.status = Status.CANCELLED
        trace_write(trace_row(m, TraceEvent.CANCELLED, at=now, actor=principal.name, log=logs[m.id])
                    for m in messages)
        batches_finished(messages, now=now)
    return len(messages)


def publish_notes(items: list[ProduceItem], results: list[ProduceResult]) -> list[dict[str, Any]]:
    """What a produce's answer says besides the results: the topics whose publishes (items
    without a group) found no subscribed group and wait in `default`, which no later
    subscriber takes over (move them: `POST /api/v1/messages/move`, or the console)."""
    published: dict[str, int] = {}
    for item in items:
        if item.group is None or item.broadcast:
            published[item.topic] = published.get(item.topic, 0) + 1
    named = {(item.topic, item.group) for item in items if not (item.group is None or item.broadcast)}
    notes = []
    for topic, count in sorted(published.items()):
        copies_to = {r.group for r in results if r.topic == topic and (topic, r.group) not in named}
        if copies_to == {DEFAULT_GROUP}:
            notes.append({
                "code": "no_subscriber", "topic": topic, "group": DEFAULT_GROUP, "count": count,
                "message": f"Topic {topic!r} has no subscribed group: {count} published message(s) wait in group "
                           f"{DEFAULT_GROUP!r}, which a group subscribing later does not take over. Pull group "
                           f"{DEFAULT_GROUP!r}, or move them (POST /api/v1/messages/move).",
            })
    return notes
