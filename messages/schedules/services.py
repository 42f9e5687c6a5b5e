"""Recurring messages: schedules (cron in a time zone) that produce one message per tick.

The beat task runs `schedules_tick` every few seconds, on any number of beat/worker
processes. A due tick is produced with the dedup key `schedule:<id>:<tick>` first and the
schedule moved on afterwards (a conditional UPDATE on the tick it read): a second runner,
or a runner that died between the two steps, produces the same key and gets the stored
message back as a duplicate. Ticks missed while no beat ran collapse into one message.

Fair across business lines: a tick takes at most TICK_LIMIT due schedules, the lines taking
turns (every line's earliest due schedule, then every line's second, ...), so one line's
thousands of due schedules delay no other line's. It produces each line's ticks in batches of
TICK_BATCH messages (one produce, one transaction), and records its lag: how long the
earliest schedule still due when it ends has been waiting (the maintenance page shows it).
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter, defaultdict
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, available_timezones

from croniter import croniter
from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Min, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from messages.delivery.produce import ProduceItem, ProduceResult, messages_produce
from messages.delivery.validation import MAX_HEADER_LENGTH, MAX_HEADERS, data_text
from messages.schedules.cron import cron_problem
from messages.schedules.models import Schedule
from mqcenter.core.audit import audit_record
from mqcenter.core.auth import Principal
from mqcenter.core.errors import Conflict, InvalidRequest, NotFound
from topics.models import Topic

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}\Z")
FIELDS = ("name", "topic", "group", "data", "headers", "cron", "timezone", "enabled")
TICK_LIMIT = 20_000  # due schedules one tick takes at most
TICK_BATCH = 500  # ticks of one business line produced in one produce (one transaction)


def schedule_clean(*, fields: dict[str, Any], partial: bool = False) -> dict[str, Any]:
    """Validate schedule fields (API.md names: `group`, not `group_name`); 400 naming the field."""
    unknown = fields.keys() - set(FIELDS)
    if unknown:
        field = sorted(unknown)[0]
        raise InvalidRequest(f"{field} is not a schedule field.", details={"field": field})
    required = () if partial else ("name", "topic", "cron")
    for field in required:
        if field not in fields:
            raise InvalidRequest(f"{field} is required.", details={"field": field})
    clean: dict[str, Any] = {}
    for field in ("name", "topic"):
        if field in fields:
            if not isinstance(fields[field], str) or not NAME_RE.match(fields[field]):
                raise InvalidRequest(f"{field} must match ^[A-Za-z0-9][A-Za-z0-9_.:-]{{0,199}}$.", details={"field": field})
            clean[field] = fields[field]
    if "group" in fields:
        group = fields["group"]
        if group is not None and (not isinstance(group, str) or not NAME_RE.match(group)):
            raise InvalidRequest("group must be null or a group name.", details={"field": "group"})
        clean["group_name"] = group or None
    if "data" in fields:
        try:
            clean["data"] = data_text(fields["data"])
        except (ValueError, TypeError, RecursionError) as exc:
            raise InvalidRequest("data must be a JSON value.", details={"field": "data"}) from exc
        if len(clean["data"].encode()) > settings.MQ_MAX_DATA_BYTES:
            raise InvalidRequest("data is too large.", details={"field": "data"})
    if "headers" in fields:
        clean["headers"] = _headers(fields["headers"])
    if "cron" in fields:
        # Five fields (minute resolution): croniter also reads a sixth (seconds) field.
        problem = cron_problem(fields["cron"])
        if problem:
            raise InvalidRequest(problem, details={"field": "cron"})
        clean["cron"] = fields["cron"].strip()
    if "timezone" in fields:
        clean["timezone"] = _zone_name(fields["timezone"])
    if "enabled" in fields:
        if not isinstance(fields["enabled"], bool):
            raise InvalidRequest("enabled must be true or false.", details={"field": "enabled"})
        clean["enabled"] = fields["enabled"]
    return clean


def schedule_errors(*, fields: dict[str, Any]) -> dict[str, str]:
    """Every field's problem at once (a form shows them all), keyed by field; empty when
    `schedule_clean` would accept the fields."""
    errors: dict[str, str] = {}
    for field, value in fields.items():
        try:
            schedule_clean(fields={field: value}, partial=True)
        except InvalidRequest as exc:
            errors[field] = exc.message
    return errors


def _headers(headers: Any) -> dict[str, str]:
    """A schedule's headers, within the limits of a produced message's (they are produced)."""
    if not isinstance(headers, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
        raise InvalidRequest("headers must be an object of strings.", details={"field": "headers"})
    if len(headers) > MAX_HEADERS - 2:  # mq-schedule and mq-schedule-tick are added to each
        raise InvalidRequest(f"headers: at most {MAX_HEADERS - 2} headers.", details={"field": "headers"})
    for key, value in headers.items():
        if not key or len(key) > MAX_HEADER_LENGTH or len(value) > MAX_HEADER_LENGTH or "\n" in key + value:
            raise InvalidRequest(
                f"headers.{key[:50]}: names and values are single lines of at most {MAX_HEADER_LENGTH} characters.",
                details={"field": f"headers.{key[:200]}"},
            )
    return headers


@functools.cache
def zone_names() -> frozenset[str]:
    """The IANA time zone names a schedule may take, as the OpenAPI document lists them.
    ZoneInfo also loads other files of the zone database (posixrules, right/UTC, posix/...):
    not zone names, and not in the list."""
    return frozenset(available_timezones())


def _zone_name(value: Any) -> str:
    if not isinstance(value, str) or value not in zone_names():
        raise InvalidRequest(f"Unknown time zone {value!r}.", details={"field": "timezone"})
    return value


def schedule_next_tick(*, cron: str, zone: str, after: datetime) -> datetime:
    """The first tick of `cron` in time zone `zone` strictly after `after`, in UTC."""
    local = after.astimezone(ZoneInfo(zone))
    return croniter(cron, local).get_next(datetime).astimezone(UTC)


def schedules_list(*, principal: Principal) -> list[Schedule]:
    rows = Schedule.objects.all()
    if principal.biz_ids is not None:
        rows = rows.filter(biz_id__in=principal.biz_ids)
    return list(rows.order_by("name")[:1000])


def schedule_get(*, principal: Principal, schedule_id: int, for_update: bool = False) -> Schedule:
    rows = Schedule.objects.select_for_update() if for_update else Schedule.objects
    schedule = rows.filter(id=schedule_id).first()
    if schedule is None or not principal.may_biz(schedule.biz_id):
        raise NotFound(f"Schedule {schedule_id} does not exist.", details={"id": schedule_id})
    return schedule


def schedule_create(*, principal: Principal, fields: dict[str, Any], now: datetime | None = None) -> Schedule:
    """Create a schedule (admin). It belongs to its topic's business line, or to the
    creator's when the topic does not exist yet."""
    principal.require_admin()
    clean = schedule_clean(fields=fields)
    biz_id = _biz_for(principal, clean["topic"])
    if Schedule.objects.filter(name=clean["name"], biz_id=biz_id).exists():  # names are per line
        raise Conflict(f"A schedule named {clean['name']!r} exists.", details={"field": "name"})
    schedule = Schedule(biz_id=biz_id, created_by=principal.name[:200], **clean)
    _plan(schedule, now or timezone.now())
    with transaction.atomic():
        schedule.save()
        audit_record(actor=principal.name, action="schedule.create", target=schedule, after=schedule_dict(schedule))
    return schedule


def schedule_update(
    *, principal: Principal, schedule_id: int, fields: dict[str, Any], now: datetime | None = None
) -> Schedule:
    """Change a schedule; a new cron, time zone or enabling re-plans the next tick."""
    principal.require_admin()
    clean = schedule_clean(fields=fields, partial=True)
    with transaction.atomic():
        schedule = schedule_get(principal=principal, schedule_id=schedule_id, for_update=True)
        before = schedule_dict(schedule)
        if "topic" in clean and clean["topic"] != schedule.topic:
            schedule.biz_id = _biz_for(principal, clean["topic"])
        if "name" in clean and Schedule.objects.filter(name=clean["name"], biz_id=schedule.biz_id).exclude(
            id=schedule.id
        ).exists():
            raise Conflict(f"A schedule named {clean['name']!r} exists.", details={"field": "name"})
        for field, value in clean.items():
            setattr(schedule, field, value)
        if clean.keys() & {"cron", "timezone", "enabled"}:
            _plan(schedule, now or timezone.now())
        schedule.save()
        audit_record(actor=principal.name, action="schedule.update", target=schedule, before=before,
                     after=schedule_dict(schedule))
    return schedule


def schedule_delete(*, principal: Principal, schedule_id: int) -> None:
    principal.require_admin()
    with transaction.atomic():
        schedule = schedule_get(principal=principal, schedule_id=schedule_id, for_update=True)
        audit_record(actor=principal.name, action="schedule.delete", target=schedule, before=schedule_dict(schedule))
        schedule.delete()


def schedule_run(*, principal: Principal, schedule_id: int, now: datetime | None = None) -> ProduceResult:
    """Produce the schedule's message now ("run now"), outside its ticks."""
    principal.require_admin()
    schedule = schedule_get(principal=principal, schedule_id=schedule_id)
    now = now or timezone.now()
    result = _produce(schedule, dedup_key=f"schedule:{schedule.id}:run:{now.isoformat()}", tick=None)
    Schedule.objects.filter(id=schedule.id).update(last_run_at=now, last_message_id=result.id, last_error="")
    audit_record(actor=principal.name, action="schedule.run", target=schedule, after={"message": result.id})
    return result


def schedules_tick(*, now: datetime | None = None) -> dict[str, Any]:
    """Produce one message for every enabled schedule whose next tick is due (at most
    TICK_LIMIT, business lines taking turns), and move each on to its first tick after
    `now`. Safe on any number of concurrent runners."""
    now = now or timezone.now()
    due = list(
        Schedule.objects.filter(enabled=True, next_run_at__lte=now)
        .annotate(line_rank=Window(RowNumber(), partition_by=[F("biz_id")], order_by=[F("next_run_at"), F("id")]))
        .order_by("line_rank", "next_run_at", "id")
        .defer("data")[:TICK_LIMIT]  # up to 256 KiB each: read a batch's at a time
    )
    lines: dict[int | None, list[Schedule]] = defaultdict(list)
    for schedule in due:
        lines[schedule.biz_id].append(schedule)
    counts = {"due": len(due), "produced": 0, "duplicates": 0, "failed": 0}
    for schedules in lines.values():
        for start in range(0, len(schedules), TICK_BATCH):
            _tick_batch(schedules[start:start + TICK_BATCH], now, counts)
    oldest = Schedule.objects.filter(enabled=True, next_run_at__lte=timezone.now()).aggregate(m=Min("next_run_at"))["m"]
    counts["lag_seconds"] = round(max(0.0, (timezone.now() - oldest).total_seconds()), 1) if oldest else 0
    return counts


def _tick_batch(schedules: list[Schedule], now: datetime, counts: dict[str, Any]) -> None:
    """Produce the due ticks of one line's schedules in one produce; if it is refused (a
    deleted topic, a full backlog), one produce each, so one broken schedule stops no other."""
    ticks = {s.id: s.next_run_at for s in schedules}
    try:
        results = _produce_many(schedules, ticks)
    except Exception:  # noqa: BLE001 - found out schedule by schedule below
        results = {}
        for schedule in schedules:
            try:
                results.update(_produce_many([schedule], ticks))
            except Exception as exc:  # noqa: BLE001 - one broken schedule must not stop the others
                Schedule.objects.filter(id=schedule.id).update(last_error=str(exc)[:2000])
                counts["failed"] += 1
    moves: dict[tuple[datetime, datetime], list[int]] = defaultdict(list)
    planned: dict[tuple[str, str, datetime], datetime] = {}  # schedules of one cron share their next tick
    for schedule in schedules:
        if schedule.id not in results:
            continue
        tick = ticks[schedule.id]
        assert tick is not None
        key = (schedule.cron, schedule.timezone, max(tick, now))
        if key not in planned:
            planned[key] = schedule_next_tick(cron=schedule.cron, zone=schedule.timezone, after=key[2])
        moves[(tick, planned[key])].append(schedule.id)
        counts["duplicates" if results[schedule.id].duplicate else "produced"] += 1
    for (tick, following), ids in moves.items():
        _move_on(ids, tick=tick, following=following, messages={i: results[i].id for i in ids})


def _move_on(ids: list[int], *, tick: datetime, following: datetime, messages: dict[int, int]) -> None:
    """Move the schedules `ids` from `tick` on to `following` in one statement, each with its
    message; moved on only from the tick read: another runner may have moved one first."""
    table = connection.ops.quote_name(Schedule._meta.db_table)
    whens = " ".join("WHEN %s THEN %s" for _ in ids)
    marks = ", ".join("%s" for _ in ids)
    params: list[Any] = [v for i in ids for v in (i, messages[i])]
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET next_run_at = %s, last_run_at = %s, last_error = '', "  # noqa: S608 - no input in it
            f"last_message_id = CASE id {whens} END, updated_at = %s WHERE id IN ({marks}) AND next_run_at = %s",
            [following, tick, *params, timezone.now(), *ids, tick],
        )


def _produce_many(schedules: list[Schedule], ticks: dict[int, datetime | None]) -> dict[int, ProduceResult]:
    """One produce of the due ticks of `schedules` (all of one business line)."""
    biz = frozenset({schedules[0].biz_id}) if schedules[0].biz_id is not None else None
    principal = Principal(name="schedules", scopes=("admin",), biz_ids=biz)
    data = dict(Schedule.objects.filter(id__in=[s.id for s in schedules]).values_list("id", "data"))
    items = []
    for schedule in schedules:
        tick = ticks[schedule.id]
        assert tick is not None
        headers = {**schedule.headers, "mq-schedule": schedule.name, "mq-schedule-tick": tick.astimezone(UTC).isoformat()}
        items.append(ProduceItem(topic=schedule.topic, data=data[schedule.id], group=schedule.group_name, headers=headers,
                                 dedup_key=f"schedule:{schedule.id}:{tick.astimezone(UTC).isoformat()}"[:200]))
    results = messages_produce(principal=principal, items=items)
    # The results come in the items' order: one for an item naming a group, one per
    # subscribed group (the same number for every publish to a topic) for a publish.
    named = Counter(item.topic for item in items if item.group is not None)
    published = Counter(item.topic for item in items if item.group is None)
    produced = Counter(result.topic for result in results)
    copies = {topic: (produced[topic] - named[topic]) // count for topic, count in published.items()}
    by_schedule: dict[int, ProduceResult] = {}
    position = 0
    for schedule, item in zip(schedules, items, strict=True):
        by_schedule[schedule.id] = results[position]
        position += 1 if item.group is not None else copies[item.topic]
    return by_schedule


def schedule_dict(schedule: Schedule) -> dict[str, Any]:
    return {
        "id": schedule.id, "name": schedule.name, "topic": schedule.topic, "group": schedule.group_name,
        "data": json.loads(schedule.data), "headers": schedule.headers, "cron": schedule.cron,
        "timezone": schedule.timezone, "enabled": schedule.enabled,
        "next_run_at": _iso(schedule.next_run_at), "last_run_at": _iso(schedule.last_run_at),
        "last_message_id": schedule.last_message_id, "last_error": schedule.last_error,
    }


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value is not None else None


def _plan(schedule: Schedule, now: datetime) -> None:
    schedule.next_run_at = (
        schedule_next_tick(cron=schedule.cron, zone=schedule.timezone, after=now) if schedule.enabled else None
    )


def _biz_for(principal: Principal, topic_name: str) -> int | None:
    topic = Topic.objects.filter(name=topic_name).only("biz_id").first()
    biz_id = topic.biz_id if topic is not None else principal.home_biz_id
    if not principal.may_biz(biz_id):
        raise NotFound(f"Topic {topic_name!r} does not exist.", details={"field": "topic"})
    return biz_id


def _produce(schedule: Schedule, *, dedup_key: str, tick: datetime | None) -> ProduceResult:
    # The schedule produces as itself, within its business line.
    biz = frozenset({schedule.biz_id}) if schedule.biz_id is not None else None
    principal = Principal(name=f"schedule:{schedule.name}"[:200], scopes=("admin",), biz_ids=biz)
    headers = {**schedule.headers, "mq-schedule": schedule.name}
    if tick is not None:
        headers["mq-schedule-tick"] = tick.astimezone(UTC).isoformat()
    item = ProduceItem(topic=schedule.topic, data=schedule.data, group=schedule.group_name, headers=headers,
                       dedup_key=dedup_key[:200])
    return messages_produce(principal=principal, items=[item])[0]

