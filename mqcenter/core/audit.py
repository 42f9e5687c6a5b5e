"""The audit log: one row per operator or admin action, in the action's transaction.

A row names its target as the operator knows it (a topic's name, a user's username, "message
1017"), stored when the action happens so a deleted target keeps its name. A bulk action is
one row that records the filter or selection and how many messages it changed, never the
list of ids (each message's trace names the actor).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

from mqcenter.models import AuditEntry


def audit_record(
    *,
    actor: str,
    action: str,
    target: Any,
    before: Any = None,
    after: Any = None,
    biz: str = "",
    target_name: str = "",
    target_id: Any = "",
) -> AuditEntry:
    """Record an action. Call inside the transaction that makes the change. `target` is the
    model instance acted on, or the name of its kind ("Message", "TopicGroup") with
    `target_id` / `target_name` saying which."""
    if isinstance(target, str):
        kind, ident, name = target, str(target_id or ""), target_name
    else:
        kind, ident, name = (
            type(target).__name__,
            str(getattr(target, "pk", "") or ""),
            target_name or audit_name(target),
        )
    return AuditEntry.objects.create(
        actor=actor[:200],
        action=action,
        target_type=kind,
        target_id=ident[:200],
        target_name=name[:200],
        biz=biz,
        before=_jsonable(before),
        after=_jsonable(after),
    )


def audit_name(target: Any) -> str:
    """How the console names a target: by its name where it has one."""
    kind = type(target).__name__
    if kind == "User":
        return str(target.username)
    if kind == "ApiToken":
        return str(target.name or target.prefix)
    if kind == "ConsoleGrant":
        on = target.biz.name if target.biz_id else "all business lines"
        return f"{target.role} of {target.user.username} on {on}"
    if kind == "BulkJob":
        return f"{target.kind} job {target.pk}"
    if kind in ("Message", "MessageArchive"):
        return f"message {target.pk} ({target.topic}/{target.group_name})"
    return str(getattr(target, "name", "") or target)


def _jsonable(value: Any) -> Any:
    if value is None:
        return None
    return json.loads(json.dumps(value, cls=DjangoJSONEncoder))
