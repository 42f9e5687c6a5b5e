"""The alarms job: backlog, age and dead-letter alarms per topic, e-mailed (and posted to the
topic's webhooks) at most once per period per topic and kind.

Reads the stats buckets the flush job writes (the latest backlog snapshot and the failed
counts of the current period), never the hot table. The "once per period" rule is a
unique row per (topic, kind, period start): whichever worker inserts it sends the e-mail;
any other worker's insert fails and it sends nothing.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import F, Max, Q, Sum
from django.utils import timezone

from messages.alarms.models import Alarm
from messages.alarms.webhooks import alarm_webhooks_enqueue
from messages.stats.models import StatsBucket
from topics.models import Topic

logger = logging.getLogger(__name__)

# A snapshot older than this is not trusted for backlog alarms (the flush job is behind).
SNAPSHOT_MAX_AGE = timedelta(minutes=5)


def period_start(now: datetime) -> datetime:
    minutes = max(settings.MQ_ALARM_PERIOD_MINUTES, 1)
    epoch_minutes = int(now.timestamp() // 60)
    return datetime.fromtimestamp((epoch_minutes - epoch_minutes % minutes) * 60, tz=UTC)


def alarms_check(*, now: datetime | None = None) -> dict[str, Any]:
    """Raise every alarm due now: record it, e-mail it and hand it to the topic's webhook
    targets (messages/alarms/webhooks.py). Returns counts of raised and e-mailed."""
    now = now or timezone.now()
    start = period_start(now)
    conditions = _conditions(now=now, since=start)
    raised = emailed = webhooks = 0
    for topic, kind, value, threshold, text, group in conditions:
        alarm = _alarm_claim(topic=topic, kind=kind, start=start, value=value, threshold=threshold,
                             text=text, now=now, group=group)
        if alarm is None:
            continue  # already raised in this period (by us or another worker)
        raised += 1
        webhooks += alarm_webhooks_enqueue(alarm=alarm, targets=list(topic.alarm_webhooks or []))
        if alarm.recipients and alarm_send(alarm=alarm):
            emailed += 1
    # E-mails sent now; webhook posts are queued here and sent by the outbound job (each
    # target's outcome is in the alarm history).
    return {"checked_topics": len({c[0] for c in conditions}), "raised": raised, "emailed": emailed,
            "webhooks_queued": webhooks}


Condition = tuple[Topic, str, float, float, str, str | None]  # topic, kind, value, threshold, text, group


def _conditions(*, now: datetime, since: datetime) -> list[Condition]:
    """The alarms due per topic, each with the group that weighs most in it (the largest
    backlog, the oldest message, the most dead letters)."""
    topics = {t.name: t for t in Topic.objects.all()}
    if not topics:
        return []
    recent = StatsBucket.objects.filter(minute__gte=now - SNAPSHOT_MAX_AGE, deliverable__isnull=False)
    latest = dict(recent.values("topic").annotate(m=Max("minute")).values_list("topic", "m"))
    snapshot: dict[str, dict[str, Any]] = {}
    for row in (
        recent.filter(topic__in=list(latest), minute__in=set(latest.values()))
        .values("topic", "group_name", "minute", "deliverable", "oldest_deliverable_age_seconds").order_by("group_name")
    ):
        if latest.get(row["topic"]) != row["minute"]:
            continue
        snap = snapshot.setdefault(row["topic"], {"backlog": 0, "oldest": None, "backlog_group": None, "oldest_group": None,
                                                  "most": -1})
        backlog, oldest = row["deliverable"] or 0, row["oldest_deliverable_age_seconds"]
        snap["backlog"] += backlog
        if backlog > snap["most"]:
            snap["most"], snap["backlog_group"] = backlog, row["group_name"]
        if oldest is not None and (snap["oldest"] is None or oldest > snap["oldest"]):
            snap["oldest"], snap["oldest_group"] = oldest, row["group_name"]
    failed: dict[str, int] = {}
    failed_group: dict[str, tuple[int, str]] = {}
    for row in (StatsBucket.objects.filter(Q(failed__gt=0) | Q(expired__gt=0), minute__gte=since)
                .values("topic", "group_name").annotate(n=Sum(F("failed") + F("expired"))).order_by("group_name")):
        failed[row["topic"]] = failed.get(row["topic"], 0) + row["n"]
        if row["n"] > failed_group.get(row["topic"], (0, ""))[0]:
            failed_group[row["topic"]] = (row["n"], row["group_name"])
    age_limit = float(settings.MQ_ALARM_OLDEST_AGE_SECONDS)
    found: list[Condition] = []
    for name, topic in sorted(topics.items()):
        snap_now = snapshot.get(name)
        if snap_now is not None and topic.backlog_alarm_threshold is not None and snap_now["backlog"] > topic.backlog_alarm_threshold:
            found.append((topic, Alarm.Kind.BACKLOG, float(snap_now["backlog"]), float(topic.backlog_alarm_threshold),
                          f"{int(snap_now['backlog'])} deliverable messages wait (threshold {topic.backlog_alarm_threshold}).",
                          snap_now["backlog_group"]))
        if snap_now is not None and snap_now["oldest"] is not None and snap_now["oldest"] > age_limit:
            found.append((topic, Alarm.Kind.OLDEST_AGE, float(snap_now["oldest"]), age_limit,
                          f"The oldest deliverable message has waited {int(snap_now['oldest'])} s (limit {int(age_limit)} s).",
                          snap_now["oldest_group"]))
        if failed.get(name):
            found.append((topic, Alarm.Kind.DEAD_LETTERS, float(failed[name]), 0.0,
                          f"{failed[name]} messages became dead letters since {since:%Y-%m-%d %H:%M} UTC.",
                          failed_group[name][1]))
    return found


def _alarm_claim(
    *, topic: Topic, kind: str, start: datetime, value: float, threshold: float, text: str, now: datetime,
    group: str | None = None,
) -> Alarm | None:
    recipients = [str(a) for a in (topic.alarm_emails or []) if str(a).strip()]
    try:
        with transaction.atomic():
            return Alarm.objects.create(
                topic=topic.name, group_name=group or "", biz_id=topic.biz_id, kind=kind, period_start=start, value=value,
                threshold=threshold, message=text, recipients=recipients, created_at=now,
            )
    except IntegrityError:
        return None


def alarm_send(*, alarm: Alarm) -> bool:
    """E-mail one alarm to its recipients; records when it was sent or why it was not."""
    subject = f"[MQ Center] {alarm.get_kind_display()} alarm on topic {alarm.topic}"
    body = (
        f"Topic: {alarm.topic}\nAlarm: {alarm.kind}\n{alarm.message}\n\n"
        f"Raised at {alarm.created_at:%Y-%m-%d %H:%M:%S} UTC. At most one e-mail per topic and "
        f"alarm kind every {settings.MQ_ALARM_PERIOD_MINUTES} minutes.\n"
    )
    try:
        send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, alarm.recipients, fail_silently=False)
    except Exception as exc:  # noqa: BLE001 - SMTP trouble must not stop the other alarms
        logger.warning("alarm e-mail for %s failed: %s", alarm.topic, exc)
        Alarm.objects.filter(pk=alarm.pk).update(send_error=f"{type(exc).__name__}: {exc}"[:2000])
        return False
    Alarm.objects.filter(pk=alarm.pk).update(sent_at=timezone.now())
    return True
