"""Alarm webhooks: every alarm the alarms job raises is posted to each of its topic's webhook
targets (topics/webhooks.py), as generic JSON or as a Slack, DingTalk or WeCom bot message.

Each target is one Celery task ("messages.alarms.webhook"): one POST with a timeout
(MQ_ALARM_WEBHOOK_TIMEOUT_SECONDS), and on failure up to MQ_ALARM_WEBHOOK_RETRIES more
after an exponential backoff. The outcome of each target is kept on the alarm row. The
allow-list (MQ_ALARM_WEBHOOK_HOSTS) is checked again before every post: an operator who
narrows it stops posts to hosts it no longer names.
"""

from __future__ import annotations

import json
import logging
import urllib.error
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from messages.alarms.models import Alarm
from mqcenter.celery import app as celery_app
from mqcenter.core.audit import audit_record
from mqcenter.core.errors import InvalidRequest
from mqcenter.core.outbound import post_json
from topics.models import Topic
from topics.webhooks import webhook_url_check, webhook_url_masked

logger = logging.getLogger(__name__)

USER_AGENT = "mqcenter-alarm"
TASK = "messages.alarms.webhook"
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
            kind=alarm.kind,
            message=alarm.message,
            value=alarm.value,
            threshold=alarm.threshold,
            raised_at=alarm.created_at,
            alarm_id=alarm.id,
        )


@dataclass(frozen=True)
class WebhookOutcome:
    ok: bool
    detail: str  # "HTTP 200" or what went wrong


def webhook_body(*, fmt: str, notice: AlarmNotice) -> dict[str, Any]:
    """The JSON posted to a target of format `fmt`."""
    test = notice.alarm_id is None
    if fmt == "generic":
        return {
            "source": "mqcenter",
            "test": test,
            "alarm": {
                "id": notice.alarm_id,
                "topic": notice.topic,
                "kind": notice.kind,
                "value": notice.value,
                "threshold": notice.threshold,
                "message": notice.message,
                "raised_at": notice.raised_at.isoformat(),
            },
        }
    title = f"[MQ Center] {KIND_LABELS.get(notice.kind, notice.kind)} alarm on topic {notice.topic}"
    text = f"{title}\n{notice.message}\nRaised at {notice.raised_at:%Y-%m-%d %H:%M:%S} UTC."
    if fmt == "slack":
        return {"text": text}
    # DingTalk and WeCom group bots take the same text message shape.
    return {"msgtype": "text", "text": {"content": text}}


def webhook_post(*, url: str, fmt: str, notice: AlarmNotice) -> str:
    """One POST of `notice` to `url`; "HTTP <status>" when it was accepted. Raises
    InvalidRequest when the host is no longer allowed, anything else on a failed post."""
    webhook_url_check(url=url, field="url")
    status, answer = post_json(
        url,
        webhook_body(fmt=fmt, notice=notice),
        timeout=settings.MQ_ALARM_WEBHOOK_TIMEOUT_SECONDS,
        user_agent=USER_AGENT,
    )
    if fmt in ("dingtalk", "wecom"):
        # Their bots answer 200 even when they refuse a message; errcode says which.
        reply = json.loads(answer or b"{}")
        code = reply.get("errcode", 0) if isinstance(reply, dict) else 0
        if code != 0:
            raise ValueError(
                f"the bot refused the message: errcode {code}: {reply.get('errmsg', '')}"
            )
    return f"HTTP {status}"


def webhook_error(exc: BaseException) -> str:
    """A failed post in a few words, for the alarm history and the console."""
    if isinstance(exc, InvalidRequest):
        return exc.message
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        exc = exc.reason if isinstance(exc.reason, BaseException) else exc
    if isinstance(exc, TimeoutError):
        return f"no answer within {settings.MQ_ALARM_WEBHOOK_TIMEOUT_SECONDS:g} s"
    return f"{type(exc).__name__}: {exc}"[:500]


def alarm_webhooks_enqueue(*, alarm: Alarm, targets: list[dict[str, str]]) -> int:
    """Mark each target pending on `alarm` and hand each to the webhook task once the
    alarm row is committed (at once outside a transaction). Returns how many."""
    if not targets:
        return 0
    pending = {t["url"]: _state(t["format"], "pending", 0, "") for t in targets}
    Alarm.objects.filter(pk=alarm.pk).update(webhooks=pending)
    for target in targets:
        args = [alarm.pk, target["url"], target["format"]]
        transaction.on_commit(lambda args=args: celery_app.send_task(TASK, args=args))
    return len(targets)


def alarm_webhook_deliver(*, alarm_id: int, url: str, fmt: str, attempt: int) -> str:
    """Post alarm `alarm_id` to one target (`attempt` counts from 1) and record the outcome on
    the alarm row under its row lock. Returns "sent", "retrying" (the caller tries again
    after alarm_webhook_retry_delay) or "failed" (refused by the allow-list, or the last
    attempt). Call outside a transaction: the post must not hold the lock."""
    alarm = Alarm.objects.filter(pk=alarm_id).first()
    if alarm is None:
        return "failed"  # its topic was deleted meanwhile
    try:
        webhook_post(url=url, fmt=fmt, notice=AlarmNotice.of(alarm))
    except InvalidRequest as exc:
        state, error = "failed", webhook_error(exc)
    except Exception as exc:  # noqa: BLE001 - any trouble on the way is a failed attempt
        state = "retrying" if attempt <= settings.MQ_ALARM_WEBHOOK_RETRIES else "failed"
        error = webhook_error(exc)
        logger.warning(
            "alarm %s webhook %s attempt %d: %s", alarm_id, webhook_url_masked(url), attempt, error
        )
    else:
        state, error = "sent", ""
    with transaction.atomic():
        row = Alarm.objects.select_for_update().filter(pk=alarm_id).first()
        if row is not None:
            row.webhooks = {**row.webhooks, url: _state(fmt, state, attempt, error)}
            row.save(update_fields=["webhooks"])
    return state


def alarm_webhook_retry_delay(*, attempt: int) -> float:
    """Seconds before the attempt after `attempt`: the backoff doubling each time."""
    return float(settings.MQ_ALARM_WEBHOOK_BACKOFF_SECONDS * 2 ** (attempt - 1))


def alarm_webhook_test(*, topic: Topic, url: str, actor: str) -> WebhookOutcome:
    """Post a test alarm to one of `topic`'s webhook targets now, once and without retries,
    so the operator sees the outcome at once; audited, whatever the outcome. A host no
    longer in the allow-list is a failed outcome; InvalidRequest when `url` is not one of
    the topic's targets."""
    target = next((t for t in topic.alarm_webhooks if t.get("url") == url), None)
    if target is None:
        raise InvalidRequest(
            f"Topic {topic.name!r} has no such webhook target.", details={"field": "url"}
        )
    notice = AlarmNotice(
        topic=topic.name,
        kind="test",
        value=0.0,
        threshold=0.0,
        raised_at=timezone.now(),
        message=f"Test alarm sent by {actor} from the MQ Center console. No action needed.",
    )
    try:
        outcome = WebhookOutcome(
            True, webhook_post(url=url, fmt=target.get("format", "generic"), notice=notice)
        )
    except Exception as exc:  # noqa: BLE001 - the operator is shown what went wrong (a host no longer allowed too)
        outcome = WebhookOutcome(False, webhook_error(exc))
    audit_record(
        actor=actor,
        action="topic.alarm_test",
        target=topic,
        biz=topic.biz.name if topic.biz_id else "",
        after={
            "webhook": webhook_url_masked(url),
            "delivered": outcome.ok,
            "detail": outcome.detail,
        },
    )
    return outcome


def _state(fmt: str, state: str, attempts: int, error: str) -> dict[str, Any]:
    return {
        "format": fmt,
        "state": state,
        "attempts": attempts,
        "error": error,
        "at": timezone.now().isoformat() if attempts else None,
    }
