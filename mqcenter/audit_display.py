"""How the audit page shows a row: the target by name with a link to its page, and
before/after as the fields that changed."""

from __future__ import annotations

import json
from typing import Any

from django.urls import NoReverseMatch, reverse

from messages.filters import filter_readable
from mqcenter.models import AuditEntry

# Target kind -> (console URL name, which stored value its page takes).
PAGES = {
    "Topic": ("console:topic", "name"),
    "Biz": ("console:biz", "id"),
    "User": ("console:user", "id"),
    "ApiToken": ("console:tokens", None),
    "Schedule": ("console:schedule", "id"),
    "BulkJob": ("console:job", "id"),
    "Message": ("console:message", "id"),
    "TopicGroup": ("console:topic_group", "group"),
}


def audit_target(entry: AuditEntry) -> tuple[str, str | None]:
    """The target's name and its console page (none once deleted, or for a group of
    messages)."""
    name = entry.target_name or f"{entry.target_type} {entry.target_id}".strip()
    page = PAGES.get(entry.target_type)
    if page is None or entry.action.endswith(".delete"):
        return name, None
    url_name, key = page
    args: list[Any]
    if key == "id":
        args = [entry.target_id] if entry.target_id.isdigit() else []
    elif key == "name":
        args = [entry.target_name] if entry.target_name else []
    elif key == "group":
        args = entry.target_name.split("/", 1) if "/" in entry.target_name else []
    else:
        args = []
    if key is not None and not args:
        return name, None
    try:
        return name, reverse(url_name, args=args)
    except NoReverseMatch:
        return name, None


def audit_changes(before: Any, after: Any) -> list[dict[str, str]]:
    """The fields that differ between before and after, each as readable text; every
    field of a created (no before) or removed (no after) target."""
    if not isinstance(before, dict) and not isinstance(after, dict):
        if before is None and after is None:
            return []
        return [
            {"field": "value", "before": _text("value", before), "after": _text("value", after)}
        ]
    old = before if isinstance(before, dict) else {}
    new = after if isinstance(after, dict) else {}
    rows = []
    for field in [*old, *(k for k in new if k not in old)]:
        if field in old and field in new and old[field] == new[field]:
            continue
        rows.append(
            {
                "field": field.replace("_", " "),
                "before": _text(field, old[field]) if field in old else "",
                "after": _text(field, new[field]) if field in new else "",
            }
        )
    return rows


def _text(field: str, value: Any) -> str:
    if field == "filter" and (value is None or isinstance(value, dict)):
        return filter_readable(value)
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(_text("", v) for v in value) or "(none)"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_text(k, v)}" for k, v in value.items()) or "(none)"
    if isinstance(value, str):
        return value
    return json.dumps(value)
