"""A message's trace as the console shows it: a requeue called a requeue, no arrow where the
status did not change, times in the logs as dates rather than raw ISO 8601, and an edit with
the fields it changed (before and after, from the audit). The stored trace and the API keep
their own wording."""

from __future__ import annotations

import re
from typing import Any

from django.utils.translation import pgettext_lazy

from messages.models import Status, TraceEvent
from mqcenter.audit_display import audit_changes
from mqcenter.models import AuditEntry

# A UTC ISO 8601 time in a log ("retry at 2026-11-27T14:05:00.123456+00:00").
_ISO_UTC = re.compile(r"\b(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(?:\.\d+)?(?:\+00:00|Z)")
# What a redrive trace row's log says the operator did.
REDRIVE_LABELS = {
    "requeue": pgettext_lazy("trace event", "Requeued"),
    "redrive": pgettext_lazy("trace event", "Redriven"),
}


def log_readable(log: str) -> str:
    """ISO 8601 UTC times written as `2026-11-27 14:05:00 UTC`."""
    return _ISO_UTC.sub(r"\1 \2 UTC", log or "")


def trace_for_console(message: Any, trace: list[Any]) -> list[Any]:
    """The trace rows with what the console shows of each: `label` (None: the event's
    name), `log_shown`, `show_status` and, for an edit, `changes` (field, before, after)."""
    edits = [audit_changes(e.before, e.after) for e in AuditEntry.objects.filter(
        target_type="Message", target_id=str(message.id), action="message.edit").order_by("id")]
    edited = 0
    for event in trace:
        event.label, event.log_shown, event.changes = None, log_readable(event.log), []
        # A nack or an edit of a held message leaves it RUNNING until its retry or death is
        # written: "→ RUNNING" there reads as if it were delivered again.
        event.show_status = bool(event.status_after) and not (
            event.status_after == Status.RUNNING and event.event != TraceEvent.PULLED)
        if event.event == TraceEvent.REDRIVEN and (event.log or "") in REDRIVE_LABELS:
            event.label, event.log_shown = REDRIVE_LABELS[event.log], ""
        elif event.event == TraceEvent.EDITED:
            event.changes = edits[edited] if edited < len(edits) else []
            edited += 1
    return trace
