"""Alarm webhooks against a real HTTP server on 127.0.0.1: the generic, Slack, DingTalk and
WeCom bodies, the host allow-list, and (on a real Celery worker, its delivery job run as beat
runs it) a slow target timed out and retried with backoff."""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Any

import pytest
from django.test import override_settings

from messages.alarms.models import Alarm
from messages.alarms.services import alarms_check
from messages.alarms.webhooks import alarm_webhooks_deliver, alarm_webhooks_enqueue
from messages.stats.flush import stats_flush
from mqcenter.core.errors import InvalidRequest
from tests.support.maintenance import CeleryProcesses, produce, wait_for
from tests.support.webhook_server import WebhookServer
from topics.models import Topic
from topics.services import topic_create, topic_update

FORMATS = ("generic", "slack", "dingtalk", "wecom")


@pytest.mark.django_db
def test_it_posts_an_alarm_to_each_target_in_its_format(
    django_capture_on_commit_callbacks: Any,
) -> None:
    with WebhookServer() as server, override_settings(MQ_ALARM_WEBHOOK_HOSTS=[server.host]):
        targets = [{"url": server.url(f"/{fmt}"), "format": fmt} for fmt in FORMATS]
        topic_create(
            actor="test",
            name="orders",
            biz=None,
            settings={"backlog_alarm_threshold": 5, "alarm_webhooks": targets},
        )
        produce("orders", 8)
        stats_flush()
        with django_capture_on_commit_callbacks() as handed_off:
            assert alarms_check()["raised"] == 1
        alarm = Alarm.objects.get()
        assert len(handed_off) == 1  # the delivery job, started once the alarm is committed
        assert {url: w["state"] for url, w in alarm.webhooks.items()} == {
            t["url"]: "pending" for t in targets
        }
        assert alarm_webhooks_deliver()["sent"] == 4  # what the outbound worker's job does

        [generic] = server.bodies("/generic")
        assert generic["source"] == "mqcenter" and generic["test"] is False
        assert {k: generic["alarm"][k] for k in ("id", "topic", "kind", "value", "threshold")} == {
            "id": alarm.id,
            "topic": "orders",
            "kind": "backlog",
            "value": 8.0,
            "threshold": 5.0,
        }
        assert "8 deliverable messages" in generic["alarm"]["message"]
        [slack] = server.bodies("/slack")
        assert list(slack) == ["text"]
        assert slack["text"].startswith(
            "[MQ Center] Backlog alarm on topic orders, group default\n8 deliverable messages"
        )
        for fmt in ("dingtalk", "wecom"):
            [body] = server.bodies(f"/{fmt}")
            assert body["msgtype"] == "text" and body["text"]["content"] == slack["text"]
        assert all(r["headers"]["Content-Type"] == "application/json" for r in server.received)
        alarm.refresh_from_db()
        assert {w["state"] for w in alarm.webhooks.values()} == {"sent"}
        assert {w["attempts"] for w in alarm.webhooks.values()} == {1}


@pytest.mark.django_db
def test_it_counts_a_bot_errcode_as_a_failed_post() -> None:
    refused = b'{"errcode": 310000, "errmsg": "keywords not in content"}'
    with (
        WebhookServer(reply=refused) as server,
        override_settings(MQ_ALARM_WEBHOOK_HOSTS=[server.host], MQ_ALARM_WEBHOOK_RETRIES=0),
    ):
        topic = topic_create(
            actor="test",
            name="orders",
            biz=None,
            settings={"alarm_webhooks": [{"url": server.url(), "format": "dingtalk"}]},
        )
        alarm = _alarm(topic)
        alarm_webhooks_enqueue(alarm=alarm, targets=topic.alarm_webhooks)
        assert alarm_webhooks_deliver()["failed"] == 1
    alarm.refresh_from_db()
    assert "errcode 310000" in alarm.webhooks[server.url()]["error"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("allowed", "url", "problem"),
    [
        ([], "http://127.0.0.1:8080/hook", "listed no hosts"),
        (
            ["hooks.example.com"],
            "https://evil.example.net/hook",
            "'evil.example.net' is not in MQ_ALARM_WEBHOOK_HOSTS",
        ),
        (
            ["hooks.example.com:8443"],
            "https://hooks.example.com/hook",
            "is not in MQ_ALARM_WEBHOOK_HOSTS",
        ),
        (["hooks.example.com"], "ftp://hooks.example.com/hook", "http or https"),
        (["hooks.example.com"], "not a url", "printable ASCII"),
        (["hooks.example.com"], "https://hooks.example.com:8443/hook", "default port only"),
    ],
)
def test_it_refuses_a_webhook_on_a_host_the_operator_did_not_allow(
    allowed: list[str], url: str, problem: str
) -> None:
    topic = Topic.objects.create(name="orders")
    with (
        override_settings(MQ_ALARM_WEBHOOK_HOSTS=allowed),
        pytest.raises(InvalidRequest) as refused,
    ):
        topic_update(
            actor="test",
            topic=topic,
            settings={"alarm_webhooks": [{"url": url, "format": "slack"}]},
        )
    assert problem in refused.value.message
    assert refused.value.details == {"field": "alarm_webhooks[0].url"}
    topic.refresh_from_db()
    assert topic.alarm_webhooks == []


@pytest.mark.django_db
def test_it_refuses_an_unknown_format_and_accepts_a_host_allowed_on_any_port() -> None:
    topic = Topic.objects.create(name="orders")
    with override_settings(MQ_ALARM_WEBHOOK_HOSTS=["hooks.example.com:*"]):
        with pytest.raises(InvalidRequest) as refused:
            topic_update(
                actor="test",
                topic=topic,
                settings={
                    "alarm_webhooks": [{"url": "https://hooks.example.com/a", "format": "teams"}]
                },
            )
        assert refused.value.details == {"field": "alarm_webhooks[0].format"}
        topic_update(
            actor="test",
            topic=topic,
            settings={
                "alarm_webhooks": [{"url": "https://hooks.example.com:8443/a", "format": "wecom"}]
            },
        )
    topic.refresh_from_db()
    assert [{k: v for k, v in h.items() if k != "secret"} for h in topic.alarm_webhooks] == [
        {"url": "https://hooks.example.com:8443/a", "format": "wecom"}]


@pytest.mark.django_db
def test_it_posts_nothing_to_a_host_removed_from_the_list_after_saving() -> None:
    with WebhookServer() as server:
        with override_settings(MQ_ALARM_WEBHOOK_HOSTS=[server.host]):
            topic = topic_create(
                actor="test",
                name="orders",
                biz=None,
                settings={"alarm_webhooks": [{"url": server.url(), "format": "generic"}]},
            )
        alarm = _alarm(topic)
        alarm_webhooks_enqueue(alarm=alarm, targets=topic.alarm_webhooks)
        with override_settings(MQ_ALARM_WEBHOOK_HOSTS=["other.example.com"]):
            # Refused for good: trying again would not help.
            assert alarm_webhooks_deliver()["failed"] == 1
        assert server.received == []
    alarm.refresh_from_db()
    assert "is not in MQ_ALARM_WEBHOOK_HOSTS" in alarm.webhooks[server.url()]["error"]


@pytest.mark.e2e
@pytest.mark.timeout(200)
@pytest.mark.django_db(transaction=True)
def test_it_times_out_a_slow_target_and_retries_it_with_backoff_on_a_worker(
    celery_procs: CeleryProcesses,
) -> None:
    with WebhookServer(slow=1, delay=30) as slow, WebhookServer(status=500) as broken:
        celery_procs.env.update(
            {
                "MQ_ALARM_WEBHOOK_HOSTS": f"{slow.host},{broken.host}",
                "MQ_ALARM_WEBHOOK_TIMEOUT_SECONDS": "1",
                "MQ_ALARM_WEBHOOK_RETRIES": "2",
                "MQ_ALARM_WEBHOOK_BACKOFF_SECONDS": "0.5",
            }
        )
        with override_settings(MQ_ALARM_WEBHOOK_HOSTS=[slow.host, broken.host]):
            topic_create(
                actor="test",
                name="orders",
                biz=None,
                settings={
                    "backlog_alarm_threshold": 1,
                    "alarm_webhooks": [
                        {"url": slow.url(), "format": "slack"},
                        {"url": broken.url(), "format": "generic"},
                    ],
                },
            )
        produce("orders", 3)
        stats_flush()
        celery_procs.worker("w1")
        # The alarms job on the worker raises the alarm and starts the delivery job.
        celery_procs.send("messages.maintenance.alarms")
        alarm = wait_for(
            lambda: Alarm.objects.filter(topic="orders").first(), what="the backlog alarm"
        )

        def states() -> dict[str, Any]:
            alarm.refresh_from_db()
            # Retries are the delivery job's next runs: beat's, every few seconds.
            celery_procs.send("messages.alarms.webhook", queue=f"{celery_procs.queue}.outbound")
            return {url: w["state"] for url, w in alarm.webhooks.items()}

        try:
            wait_for(
                lambda: states() == {slow.url(): "sent", broken.url(): "failed"},
                timeout=120,
                what="the slow target sent on its retry and the broken one given up",
            )
        except AssertionError:
            raise AssertionError(f"{states()}\n{celery_procs.output()}") from None
        # The slow target: timed out once, answered on the retry, the backoff waited between.
        assert len(slow.received) == 2 and alarm.webhooks[slow.url()]["attempts"] == 2
        assert slow.received[1]["at"] - slow.received[0]["at"] >= 1 + 0.5
        # The broken one: the first try and 2 retries, 0.5 s then 1 s apart.
        assert len(broken.received) == 3
        gaps = [
            b["at"] - a["at"] for a, b in zip(broken.received, broken.received[1:], strict=False)
        ]
        assert gaps[0] >= 0.5 and gaps[1] >= 1.0, gaps
        assert alarm.webhooks[broken.url()] | {"at": None} == {
            "format": "generic",
            "state": "failed",
            "attempts": 3,
            "retries": 2,
            "error": "HTTP 500 Internal Server Error",
            "at": None,
            "due": None,
        }


def _alarm(topic: Topic) -> Alarm:
    from django.utils import timezone

    now = timezone.now()
    return Alarm.objects.create(
        topic=topic.name,
        kind=Alarm.Kind.DEAD_LETTERS,
        period_start=now,
        value=3,
        threshold=0,
        message="3 messages became dead letters.",
        created_at=now,
    )


@pytest.mark.django_db
def test_it_signs_each_post_with_its_targets_secret_and_links_the_group_in_the_console(
    django_capture_on_commit_callbacks: Any,
) -> None:
    with WebhookServer() as server, override_settings(MQ_ALARM_WEBHOOK_HOSTS=[server.host],
                                                      MQ_ADVERTISED_URL="https://mq.example.com"):
        targets = [{"url": server.url("/a"), "format": "generic"}, {"url": server.url("/b"), "format": "slack"}]
        topic = topic_create(actor="test", name="orders", biz=None,
                             settings={"backlog_alarm_threshold": 5, "alarm_webhooks": targets})
        secrets = {h["url"]: h["secret"] for h in topic.alarm_webhooks}
        produce("orders", 8)
        stats_flush()
        with django_capture_on_commit_callbacks(execute=False):
            assert alarms_check()["webhooks_queued"] == 2
        assert alarm_webhooks_deliver()["sent"] == 2
        for received in server.received:
            url = server.url(received["path"])
            # What docs/alarms.md tells a receiver to do.
            timestamp = received["headers"]["X-MQ-Timestamp"]
            expected = hmac.new(secrets[url].encode(), timestamp.encode() + b"." + received["raw"], hashlib.sha256)
            assert received["headers"]["X-MQ-Signature"] == f"v1={expected.hexdigest()}"
            assert abs(time.time() - int(timestamp)) < 60
            forged = hmac.new(b"whsec_other", timestamp.encode() + b"." + received["raw"], hashlib.sha256)
            assert received["headers"]["X-MQ-Signature"] != f"v1={forged.hexdigest()}"
        [generic] = server.bodies("/a")
        assert generic["alarm"]["group"] == "default"
        assert generic["alarm"]["console_url"] == "https://mq.example.com/topics/orders/groups/default/"
        [slack] = server.bodies("/b")
        assert slack["text"].endswith("\nhttps://mq.example.com/topics/orders/groups/default/")
