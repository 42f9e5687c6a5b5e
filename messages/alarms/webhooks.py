"""Alarm webhooks: every alarm the alarms job raises is posted to each of its topic's webhook
targets (topics/webhooks.py), as generic JSON or as a Slack, DingTalk or WeCom bot message.

Deliveries are state on the alarm row: each target's "pending", "retrying", "sent" or
"failed", and the row's `webhooks_due_at`, the earliest moment one of its targets is due.
The delivery job (`alarm_webhooks_deliver`, on the outbound queue, every few seconds and at
once after an alarm is raised) takes due alarms fairly across business lines, at most
MQ_OUTBOUND_PER_BIZ posts a line, and makes all its posts at once through
mqcenter/core/outbound.py, each within MQ_ALARM_WEBHOOK_TIMEOUT_SECONDS in all: a run lasts
one deadline at most and one line's slow targets delay only that line's alarms. A failed post
is tried again after MQ_ALARM_WEBHOOK_BACKOFF_SECONDS, doubling, up to MQ_ALARM_WEBHOOK_RETRIES
times. The allow-list (MQ_ALARM_WEBHOOK_HOSTS) is checked again before every post. The
console's "send test alarm" is an alarm of kind "test" with one target and no retries: the
same job sends it, never a thread that serves HTTP requests.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Window
from django.db.models.functions import RowNumber
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode

from messages.alarms.models import Alarm
from mqcenter.celery import app as celery_app
from mqcenter.core.audit import audit_record
from mqcenter.core.errors import InvalidRequest
from mqcenter.core.outbound import Answer, Call, allow_list, post_many
from topics.models import Biz, Topic
from topics.webhooks import webhook_url_check, webhook_url_masked

logger = logging.getLogger(__name__)

USER_AGENT = "mqcenter-alarm"
TASK = "messages.alarms.webhook"
# Whoever took an alarm's due targets holds them this long past the post's deadline; a
# worker that died meanwhile leaves them to the next run after it.
CLAIM_GRACE_SECONDS = 30
KIND_LABELS = {
    "backlog": "Backlog",
    "oldest_age": "Oldest message age",
    "dead_letters": "Dead letters",
    "test": "Test",
}


@dataclass(frozen=True)
class AlarmNotice:
    """What a webhook post says: an alarm, or a test sent from the console (alarm_id None)."""

    topic: str
    group: str | None
    kind: str
    message: str
    value: float
    threshold: float
    raised_at: datetime
    alarm_id: int | None = None

    @classmethod
    def of(cls, alarm: Alarm) -> AlarmNotice:
        return cls(
            topic=alarm.topic,
            group=alarm.group_name or None,
            kind=alarm.kind,
            message=alarm.message,
            value=alarm.value,
            threshold=alarm.threshold,
            raised_at=alarm.created_at,
            alarm_id=None if alarm.kind == Alarm.Kind.TEST else alarm.id,
        )


def webhook_console_url(notice: AlarmNotice) -> str | None:
    """The console page that shows the alarm's problem, under MQ_ADVERTISED_URL (None when
    that is not set): the dead letters of the topic, the group's page, or the topic's."""
    base = settings.MQ_ADVERTISED_URL.rstrip("/")
    if not base:
        return None
    if notice.kind == Alarm.Kind.DEAD_LETTERS:
        return f"{base}{reverse('console:dead_letters')}?{urlencode({'topic': notice.topic})}"
    if notice.group:
        return f"{base}{reverse('console:topic_group', args=[notice.topic, notice.group])}"
    return f"{base}{reverse('console:topic', args=[notice.topic])}"


def webhook_signature(*, secret: str, timestamp: int, body: bytes) -> str:
    """The X-MQ-Signature header: `v1=` and the hex HMAC-SHA256, under the target's secret,
    of the timestamp, a dot and the exact body bytes (docs/operating.md, "Verifying a
    webhook's signature", shows how to check it)."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"v1={mac.hexdigest()}"


def webhook_signed(*, secret: str | None, body: dict[str, Any], now: datetime) -> tuple[bytes, dict[str, str]]:
    """The body's bytes as posted and its signature headers (none without a secret)."""
    content = json.dumps(body, ensure_ascii=False).encode()
    if not secret:
        return content, {}
    timestamp = int(now.timestamp())
    return content, {"X-MQ-Timestamp": str(timestamp),
                     "X-MQ-Signature": webhook_signature(secret=secret, timestamp=timestamp, body=content)}


def webhook_body(*, fmt: str, notice: AlarmNotice) -> dict[str, Any]:
    """The JSON posted to a target of format `fmt`."""
    test = notice.alarm_id is None
    link = webhook_console_url(notice)
    if fmt == "generic":
        return {
            "source": "mqcenter",
            "test": test,
            "alarm": {
                "id": notice.alarm_id,
                "topic": notice.topic,
                "group": notice.group,
                "console_url": link,
                "kind": notice.kind,
                "value": notice.value,
                "threshold": notice.threshold,
                "message": notice.message,
                "raised_at": notice.raised_at.isoformat(),
            },
        }
    where = f"topic {notice.topic}" + (f", group {notice.group}" if notice.group else "")
    title = f"[MQ Center] {KIND_LABELS.get(notice.kind, notice.kind)} alarm on {where}"
    text = f"{title}\n{notice.message}\nRaised at {notice.raised_at:%Y-%m-%d %H:%M:%S} UTC." + (f"\n{link}" if link else "")
    if fmt == "slack":
        return {"text": text}
    # DingTalk and WeCom group bots take the same text message shape.
    return {"msgtype": "text", "text": {"content": text}}


def webhook_answer_error(*, fmt: str, answer: Answer) -> str:
    """Why a post failed ("" when it was accepted), for the alarm history and the console."""
    if not answer.ok:
        return answer.error
    if fmt in ("dingtalk", "wecom"):
        # Their bots answer 200 even when they refuse a message; errcode says which.
        try:
            reply = answer.json()
        except ValueError:
            return ""
        code = reply.get("errcode", 0) if isinstance(reply, dict) else 0
        if code != 0:
            return f"the bot refused the message: errcode {code}: {reply.get('errmsg', '')}"[:500]
    return ""


def alarm_webhooks_enqueue(*, alarm: Alarm, targets: list[dict[str, str]], retries: int | None = None) -> int:
    """Mark each target pending on `alarm`, due now, and start the delivery job once the
    alarm row is committed (at once outside a transaction). Returns how many."""
    if not targets:
        return 0
    retries = settings.MQ_ALARM_WEBHOOK_RETRIES if retries is None else retries
    now = timezone.now()
    pending = {t["url"]: _state(t["format"], "pending", 0, "", due=now, retries=retries) for t in targets}
    Alarm.objects.filter(pk=alarm.pk).update(webhooks=pending, webhooks_due_at=now)
    transaction.on_commit(lambda: celery_app.send_task(TASK))
    return len(targets)


def alarm_webhooks_deliver(*, now: datetime | None = None) -> dict[str, int]:
    """Post every due webhook target this run takes: each business line's earliest due
    alarms, at most MQ_OUTBOUND_PER_BIZ posts a line and MQ_OUTBOUND_CONCURRENCY in all,
    all at once. Records each outcome on its alarm row. Call outside a transaction."""
    now = now or timezone.now()
    taken = _due_taken(now)
    keys = _secrets({alarm.topic for alarm, *_ in taken})
    calls = []
    for alarm, url, state, biz in taken:
        content, headers = webhook_signed(secret=keys.get((alarm.topic, url)),
                                          body=webhook_body(fmt=state["format"], notice=AlarmNotice.of(alarm)),
                                          now=timezone.now())
        calls.append(Call(url, content, biz=biz, headers=headers))
    answers = post_many(
        calls, allowed=allow_list("MQ_ALARM_WEBHOOK_HOSTS"), deadline=settings.MQ_ALARM_WEBHOOK_TIMEOUT_SECONDS,
        user_agent=USER_AGENT, per_group=settings.MQ_OUTBOUND_PER_BIZ, overall=settings.MQ_OUTBOUND_CONCURRENCY,
    )
    finished = timezone.now()  # the backoff counts from the failed post's end
    outcomes: dict[int, dict[str, dict[str, Any]]] = {}
    counts = {"posted": len(taken), "sent": 0, "retrying": 0, "failed": 0}
    for (alarm, url, state, _biz), answer in zip(taken, answers, strict=True):
        error = webhook_answer_error(fmt=state["format"], answer=answer)
        attempt = state["attempts"] + 1
        if not error:
            new = _state(state["format"], "sent", attempt, "", retries=state["retries"])
        elif attempt <= state["retries"] and not _refused(url, alarm):
            delay = float(settings.MQ_ALARM_WEBHOOK_BACKOFF_SECONDS * 2 ** (attempt - 1))
            new = _state(state["format"], "retrying", attempt, error, due=finished + timedelta(seconds=delay),
                         retries=state["retries"])
        else:
            new = _state(state["format"], "failed", attempt, error, retries=state["retries"])
        if error:
            logger.warning("alarm %s webhook %s attempt %d: %s", alarm.pk, webhook_url_masked(url), attempt, error)
        counts[new["state"]] += 1
        outcomes.setdefault(alarm.pk, {})[url] = new
    for alarm_id in {alarm.pk for alarm, *_ in taken}:
        _record(alarm_id, outcomes.get(alarm_id, {}))
    return counts


def _secrets(topics: set[str]) -> dict[tuple[str, str], str]:
    """The signing secret of each (topic, webhook URL) as the topic has it now."""
    found: dict[tuple[str, str], str] = {}
    for name, hooks in Topic.objects.filter(name__in=topics).values_list("name", "alarm_webhooks"):
        for hook in hooks or []:
            if hook.get("secret"):
                found[(name, hook["url"])] = hook["secret"]
    return found


def _refused(url: str, alarm: Alarm) -> bool:
    """Whether the allow-list no longer lets this alarm's line call `url`: no use retrying."""
    try:
        webhook_url_check(url=url, field="url", biz=_biz_name(alarm.biz_id))
    except InvalidRequest:
        return True
    return False


def _biz_name(biz_id: int | None) -> str | None:
    return None if biz_id is None else Biz.objects.filter(id=biz_id).values_list("name", flat=True).first()


def _due_taken(now: datetime) -> list[tuple[Alarm, str, dict[str, Any], str | None]]:
    """(alarm, url, its state, business line name) of the due targets this run takes. Each
    alarm row taken is held (its `webhooks_due_at` moved past this run) by a conditional
    UPDATE, so concurrent runs never post the same target twice."""
    per_biz = max(1, settings.MQ_OUTBOUND_PER_BIZ)
    due = list(
        Alarm.objects.filter(webhooks_due_at__lte=now)
        .annotate(line_rank=Window(RowNumber(), partition_by=[F("biz_id")], order_by=[F("webhooks_due_at"), F("id")]))
        .filter(line_rank__lte=per_biz)
        .order_by("line_rank", "webhooks_due_at", "id")[: max(1, settings.MQ_OUTBOUND_CONCURRENCY)]
    )
    hold = now + timedelta(seconds=settings.MQ_ALARM_WEBHOOK_TIMEOUT_SECONDS + CLAIM_GRACE_SECONDS)
    names: dict[int | None, str | None] = {}
    slots: dict[int | None, int] = {}
    taken = []
    for alarm in due:
        if slots.get(alarm.biz_id, 0) >= per_biz:
            continue
        if not Alarm.objects.filter(pk=alarm.pk, webhooks_due_at=alarm.webhooks_due_at).update(webhooks_due_at=hold):
            continue  # another run took it
        if alarm.biz_id not in names:
            names[alarm.biz_id] = _biz_name(alarm.biz_id)
        for url, state in sorted(alarm.webhooks.items()):
            if state.get("state") in ("pending", "retrying") and _due(state) <= now and slots.get(alarm.biz_id, 0) < per_biz:
                slots[alarm.biz_id] = slots.get(alarm.biz_id, 0) + 1
                taken.append((alarm, url, {"attempts": 0, "retries": 0, **state}, names[alarm.biz_id]))
        if not any(a.pk == alarm.pk for a, *_ in taken):
            _record(alarm.pk, {})  # nothing due after all: only its due time is set right
    return taken


def _due(state: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(state["due"]) if state.get("due") else datetime.min.replace(tzinfo=UTC)


def _record(alarm_id: int, outcomes: dict[str, dict[str, Any]]) -> None:
    """Write the outcomes on the alarm row under its lock, and its next due time: the
    earliest of its targets still pending or retrying (None when none is)."""
    with transaction.atomic():
        row = Alarm.objects.select_for_update().filter(pk=alarm_id).first()
        if row is None:
            return  # its topic was deleted meanwhile
        row.webhooks = {**row.webhooks, **outcomes}
        waiting = [_due(s) for s in row.webhooks.values() if s.get("state") in ("pending", "retrying")]
        row.webhooks_due_at = min(waiting) if waiting else None
        row.save(update_fields=["webhooks", "webhooks_due_at"])


def alarm_webhook_test(*, topic: Topic, url: str, actor: str) -> Alarm:
    """Queue a test alarm to one of `topic`'s webhook targets, once and without retries: an
    alarm of kind "test" that the delivery job posts; its row shows the outcome. Audited.
    InvalidRequest when `url` is not one of the topic's targets."""
    target = next((t for t in topic.alarm_webhooks if t.get("url") == url), None)
    if target is None:
        raise InvalidRequest(f"Topic {topic.name!r} has no such webhook target.", details={"field": "url"})
    now = timezone.now()
    with transaction.atomic():
        alarm = Alarm.objects.create(
            topic=topic.name, biz_id=topic.biz_id, kind=Alarm.Kind.TEST, period_start=now, value=0.0, threshold=0.0,
            message=f"Test alarm sent by {actor} from the MQ Center console. No action needed.",
            recipients=[], created_at=now,
        )
        alarm_webhooks_enqueue(alarm=alarm, targets=[{"url": url, "format": target.get("format", "generic")}], retries=0)
        audit_record(actor=actor, action="topic.alarm_test", target=topic, biz=topic.biz.name if topic.biz_id else "",
                     after={"webhook": webhook_url_masked(url), "alarm": alarm.pk})
    alarm.refresh_from_db()
    return alarm


def _state(fmt: str, state: str, attempts: int, error: str, *, retries: int, due: datetime | None = None) -> dict[str, Any]:
    return {
        "format": fmt,
        "state": state,
        "attempts": attempts,
        "retries": retries,
        "error": error,
        "at": timezone.now().isoformat() if attempts else None,
        "due": due.isoformat() if due is not None else None,
    }
