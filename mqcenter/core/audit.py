"""The audit log: one row per operator or admin action, in the action's transaction."""

from __future__ import annotations

import json
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

from mqcenter.models import AuditEntry


def audit_record(
    *, actor: str, action: str, target: Any, before: Any = None, after: Any = None, biz: str = ""
) -> AuditEntry:
    """Record an action. Call inside the transaction that makes the change."""
    return AuditEntry.objects.create(
        actor=actor[:200],
        action=action,
        target_type=type(target).__name__ if not isinstance(target, str) else target,
        target_id=str(getattr(target, "pk", "") or ""),
        biz=biz,
        before=_jsonable(before),
        after=_jsonable(after),
    )


def _jsonable(value: Any) -> Any:
    if value is None:
        return None
    return json.loads(json.dumps(value, cls=DjangoJSONEncoder))
