"""The message filter shared by search, redrive, delete and bulk jobs."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, ClassVar

from django.conf import settings
from django.db import connection
from django.db.models import CharField, Model, Q, QuerySet
from django.db.models.expressions import RawSQL

from messages.archive.models import MessageArchive
from messages.models import DEAD_STATUSES, MAX_PRIORITY, Message, Status
from mqcenter.core.auth import Principal
from mqcenter.core.dates import parse_iso_datetime
from mqcenter.core.errors import InvalidRequest
from topics.models import Topic
from topics.services import topic_is_deleting

# A query string's number: ASCII digits only (int() would also read " 5", "+5", "1_0" and
# other scripts' digits, which the OpenAPI document's patterns refuse).
_DIGITS = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class MessageFilter:
    topic: str | None = None
    group: str | None = None
    status: tuple[str, ...] = ()
    key: str | None = None
    id: int | None = None
    added_after: datetime | None = None
    added_before: datetime | None = None
    priority: int | None = None
    text: str | None = None  # substring of the payload (scans: combine with other filters)
    tag: str | None = None  # not indexed: combine with a topic (its keyset order)

    TIME_FIELDS: ClassVar[tuple[str, ...]] = ("added_after", "added_before")

    @classmethod
    def parse(cls, raw: dict[str, Any], *, field_prefix: str = "", blank_is_absent: bool = True) -> MessageFilter:
        """Build from query parameters or a JSON object; unknown keys are refused.

        Query strings send "" for an empty form field, which means "no filter"; a JSON
        filter (`blank_is_absent=False`) must hold real values of the documented types.
        """
        known = {f.name for f in fields(cls)}
        unknown = set(raw) - known - {"cursor", "limit"}
        if unknown:
            name = sorted(unknown)[0]
            raise InvalidRequest(f"Unknown filter {name!r}.", details={"field": f"{field_prefix}{name}"})
        if not blank_is_absent:
            _require_json_types(raw, field_prefix)
        values: dict[str, Any] = {}
        for name in ("topic", "group", "key", "text", "tag"):
            if raw.get(name) not in (None, ""):
                values[name] = str(raw[name])
        if raw.get("status") not in (None, ""):
            statuses = raw["status"] if isinstance(raw["status"], list) else str(raw["status"]).split(",")
            bad = [s for s in statuses if s not in Status.values]
            if bad:
                raise InvalidRequest(f"Unknown status {bad[0]!r}.", details={"field": f"{field_prefix}status"})
            values["status"] = tuple(statuses)
        if raw.get("id") not in (None, ""):
            values["id"] = _integer(raw["id"])
            if values["id"] is None:
                raise InvalidRequest("id must be an integer.", details={"field": f"{field_prefix}id"})
        if raw.get("priority") not in (None, ""):
            priority = _integer(raw["priority"])
            if priority is None or not 0 <= priority <= MAX_PRIORITY:
                raise InvalidRequest(
                    f"priority must be an integer from 0 to {MAX_PRIORITY}.", details={"field": f"{field_prefix}priority"}
                )
            values["priority"] = priority
        for name in cls.TIME_FIELDS:
            if raw.get(name) not in (None, ""):
                parsed = parse_iso_datetime(raw[name])
                if parsed is None or parsed.tzinfo is None:
                    raise InvalidRequest(
                        f"{name} must be an ISO 8601 datetime with offset.",
                        details={"field": f"{field_prefix}{name}"},
                    )
                values[name] = parsed
        return cls(**values)

    def is_empty(self) -> bool:
        return self == type(self)()

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value in (None, ()):
                continue
            out[f.name] = value.isoformat() if isinstance(value, datetime) else (list(value) if isinstance(value, tuple) else value)
        return out

    def queryset(self, principal: Principal, *, model: type[Model] = Message) -> QuerySet[Any]:
        """Messages matching the filter that the principal may see (of `model`: the live
        table by default, or the archive, which has the same columns)."""
        rows = model._default_manager.all()
        if self.id is not None:
            rows = rows.filter(id=self.id)
        if self.topic:
            rows = rows.filter(topic=self.topic)
        if self.group:
            rows = rows.filter(group_name=self.group)
        if self.status:
            rows = rows.filter(status__in=self.status)
        if self.key:
            rows = rows.filter(key=self.key)
            if self.status and model is Message and connection.vendor == "mysql":
                # `ix_msg_key` holds a keyed message's status as `key_status` (messages
                # migration 0011): the same condition on it keeps the index's whole prefix.
                rows = rows.alias(key_status=RawSQL("key_status", (), output_field=CharField())).filter(
                    key_status__in=self.status)
        if self.tag:
            rows = rows.filter(tag=self.tag)
        if self.priority is not None:
            rows = rows.filter(priority=self.priority)
        if self.added_after:
            rows = rows.filter(add_time__gte=self.added_after)
        if self.added_before:
            rows = rows.filter(add_time__lt=self.added_before)
        if self.text:
            rows = rows.filter(data__contains=self.text)
        if principal.biz_ids is not None:
            # A literal list, not a subquery: with "topic IN (SELECT ...)" MariaDB sorted all
            # of a business line's rows before the LIMIT (seconds at 1M rows).
            names = list(Topic.objects.filter(biz_id__in=principal.biz_ids).values_list("name", flat=True))
            rows = rows.filter(topic__in=names)
        elif self.topic and topic_is_deleting(self.topic):
            return rows.none()  # a deleted topic's messages, until its purge removes them
        return rows


@dataclass(frozen=True)
class ArchiveFilter(MessageFilter):
    """The archive's filter: the message filter plus when the message finished (its last
    change, `update_time`: archived messages are all finished)."""

    finished_after: datetime | None = None
    finished_before: datetime | None = None

    TIME_FIELDS: ClassVar[tuple[str, ...]] = ("added_after", "added_before", "finished_after", "finished_before")

    def queryset(self, principal: Principal, *, model: type[Model] = MessageArchive) -> QuerySet[Any]:
        rows = super().queryset(principal, model=model)
        if self.finished_after:
            rows = rows.filter(update_time__gte=self.finished_after)
        if self.finished_before:
            rows = rows.filter(update_time__lt=self.finished_before)
        return rows


def _integer(value: Any) -> int | None:
    """A JSON integer (not a boolean) or a query string of ASCII digits; None for anything else."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _DIGITS.fullmatch(value):
        return int(value)
    return None


def _require_json_types(raw: dict[str, Any], field_prefix: str) -> None:
    for name, value in raw.items():
        if value is None:
            continue
        if name in ("id", "priority"):
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif name == "status":  # one status, or a list of them
            ok = (isinstance(value, str) and value != "") or (
                isinstance(value, list) and all(isinstance(s, str) for s in value))
        else:
            ok = isinstance(value, str) and value != ""
        if not ok:
            raise InvalidRequest(
                f"{name} is not a valid filter value.", details={"field": f"{field_prefix}{name}"}
            )


def dead_letter_q() -> Q:
    return Q(status__in=DEAD_STATUSES)


def filter_readable(stored: dict[str, Any] | None) -> str:
    """A stored filter (`MessageFilter.as_json`, a job's or an audit row's) as an operator
    reads it: `topic orders · group billing · status FAIL or TIMEOUT · reason "bad sku"`."""
    if not stored:
        return "(no filter)"
    parts = []
    for name, value in stored.items():
        if isinstance(value, list | tuple):
            shown = " or ".join(str(v) for v in value)
        elif name in ("reason", "text", "key"):
            shown = json.dumps(value, ensure_ascii=False)
        else:
            shown = str(value)
        parts.append(f"{name.replace('_', ' ')} {shown}")
    return " · ".join(parts)


def filter_targets(
    principal: Principal, ids: list[int] | None, filter: MessageFilter | None, *, kind: type[MessageFilter] = MessageFilter
) -> QuerySet[Any]:
    """The messages an operation takes: `ids` (at most MQ_REDRIVE_SYNC_LIMIT) or a non-empty
    filter, never both, cut to the principal's business lines (`kind` ArchiveFilter: archived
    messages). 400 with the field otherwise: an empty filter would take everything."""
    if (ids is None) == (filter is None):
        raise InvalidRequest("Give either ids or filter.", details={"field": "ids"})
    if ids is not None:
        if len(ids) > settings.MQ_REDRIVE_SYNC_LIMIT:
            raise InvalidRequest(f"At most {settings.MQ_REDRIVE_SYNC_LIMIT} ids.", details={"field": "ids"})
        return kind().queryset(principal).filter(id__in=ids)
    assert filter is not None
    if filter.is_empty():
        raise InvalidRequest("An empty filter would match every message; name at least one field.",
                             details={"field": "filter"})
    return filter.queryset(principal)
