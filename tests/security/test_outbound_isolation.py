"""One business line's broken or hostile endpoints cost only that line: check-backs and alarm
webhooks against real servers on 127.0.0.1 that drip their answer, speak another protocol,
reset, or sit behind a URL with a line break, beside another line's good endpoint."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from messages.alarms.models import Alarm
from messages.models import Message
from messages.transactions.models import Transaction
from tests.support.console import client_for, make_user
from tests.support.webhook_server import (
    WebhookServer,
    dripping_server,
    not_http_server,
    reset_server,
)
from topics.models import Biz, Topic

pytestmark = pytest.mark.django_db
DEADLINE = 1.5


def open_transaction(biz: Biz, url: str, topic: str) -> str:
    now = timezone.now()
    message = Message.objects.create(topic=topic, group_name="g", data="1", status="PREPARED",
                                     effect_time=now, add_time=now, update_time=now)
    txn = Transaction.objects.create(biz_id=biz.id, producer="p", topics=[topic], message_ids=[message.id], check_url=url,
                                     check_after_seconds=1, next_check_at=now, created_at=now)
    return txn.id


def test_a_lines_hostile_check_endpoints_cost_only_that_line(shop: Biz, other_biz: Biz) -> None:
    from messages.transactions.services import transactions_check

    Topic.objects.create(name="orders", biz=shop)
    Topic.objects.create(name="books", biz=other_biz)
    with (
        WebhookServer(reply=b'{"state": "commit"}') as good,
        not_http_server() as broken,
        dripping_server(every=0.5) as slow,
        reset_server() as reset,
        override_settings(MQ_TRANSACTION_CHECK_HOSTS=["127.0.0.1:*"], MQ_TRANSACTION_CHECK_TIMEOUT_SECONDS=DEADLINE),
    ):
        hostile = [
            open_transaction(shop, broken.url("/check"), "orders"),
            open_transaction(shop, slow.url("/check"), "orders"),
            open_transaction(shop, reset.url("/check"), "orders"),
            open_transaction(shop, f"http://127.0.0.1:{good.port}/x\r\nX-Injected: 1", "orders"),
        ]
        theirs = open_transaction(other_biz, good.url("/check"), "books")
        started = time.monotonic()
        counts = transactions_check(now=timezone.now() + timedelta(seconds=1))
        took = time.monotonic() - started

    assert Transaction.objects.get(id=theirs).state == "committed"
    assert counts == {"checked": 5, "committed": 1, "rolled_back": 0, "unknown": 4}
    for txn in Transaction.objects.filter(id__in=hostile):
        assert txn.state == "open" and txn.last_error.startswith("check-back failed"), txn.last_error
    assert "within 1.5 s" in Transaction.objects.get(id=hostile[1]).last_error
    assert took < DEADLINE + 3, took
    assert [r["path"] for r in good.received] == ["/check"]  # the line break reached nobody


def test_a_check_run_asks_each_line_its_share_first(shop: Biz, other_biz: Biz) -> None:
    from messages.transactions.services import transactions_check

    Topic.objects.create(name="orders", biz=shop)
    Topic.objects.create(name="books", biz=other_biz)
    with (
        WebhookServer(reply=b'{"state": "unknown"}') as busy,
        WebhookServer(reply=b'{"state": "commit"}') as mine,
        override_settings(MQ_TRANSACTION_CHECK_HOSTS=["127.0.0.1:*"], MQ_OUTBOUND_PER_BIZ=2,
                          MQ_TRANSACTION_CHECK_CONCURRENCY=3),
    ):
        for _ in range(20):  # shop's due first: they are older
            open_transaction(shop, busy.url(), "orders")
        theirs = open_transaction(other_biz, mine.url(), "books")
        counts = transactions_check(now=timezone.now() + timedelta(seconds=1))
    assert counts["checked"] == 3 and Transaction.objects.get(id=theirs).state == "committed"
    assert len(busy.received) == 2


def alarm_on(topic: Topic, urls: list[str], fmt: str = "generic") -> Alarm:
    from messages.alarms.webhooks import alarm_webhooks_enqueue

    now = timezone.now()
    alarm = Alarm.objects.create(topic=topic.name, biz_id=topic.biz_id, kind=Alarm.Kind.BACKLOG, period_start=now,
                                 value=5, threshold=1, message="5 wait", created_at=now)
    alarm_webhooks_enqueue(alarm=alarm, targets=[{"url": u, "format": fmt} for u in urls])
    return alarm


def test_a_lines_hostile_webhooks_cost_only_that_line(shop: Biz, other_biz: Biz) -> None:
    from messages.alarms.webhooks import alarm_webhooks_deliver

    with (
        WebhookServer() as good,
        not_http_server() as broken,
        dripping_server(every=0.5) as slow,
        override_settings(MQ_ALARM_WEBHOOK_HOSTS=["127.0.0.1:*"], MQ_ALARM_WEBHOOK_TIMEOUT_SECONDS=DEADLINE),
    ):
        mine = alarm_on(Topic.objects.create(name="orders", biz=shop), [broken.url("/b"), slow.url("/s")])
        theirs = alarm_on(Topic.objects.create(name="books", biz=other_biz), [good.url("/theirs")])
        started = time.monotonic()
        counts = alarm_webhooks_deliver()
        took = time.monotonic() - started

    assert counts == {"posted": 3, "sent": 1, "retrying": 2, "failed": 0}
    assert Alarm.objects.get(pk=theirs.pk).webhooks[good.url("/theirs")]["state"] == "sent"
    hooks = Alarm.objects.get(pk=mine.pk).webhooks
    assert "not a valid HTTP answer" in hooks[broken.url("/b")]["error"]
    assert "within 1.5 s" in hooks[slow.url("/s")]["error"]
    assert Alarm.objects.get(pk=mine.pk).webhooks_due_at > timezone.now()  # retried after the backoff
    assert took < DEADLINE + 3, took


def test_a_webhook_is_tried_again_and_then_given_up(shop: Biz) -> None:
    from messages.alarms.webhooks import alarm_webhooks_deliver

    with (
        WebhookServer(status=502, reply=b"bad gateway") as server,
        override_settings(MQ_ALARM_WEBHOOK_HOSTS=["127.0.0.1:*"], MQ_ALARM_WEBHOOK_RETRIES=1,
                          MQ_ALARM_WEBHOOK_BACKOFF_SECONDS=0),
    ):
        alarm = alarm_on(Topic.objects.create(name="orders", biz=shop), [server.url()])
        assert alarm_webhooks_deliver()["retrying"] == 1
        assert alarm_webhooks_deliver()["failed"] == 1
        assert alarm_webhooks_deliver()["posted"] == 0
    state = Alarm.objects.get(pk=alarm.pk)
    assert state.webhooks_due_at is None
    assert state.webhooks[server.url()] | {"state": "failed", "attempts": 2} == state.webhooks[server.url()]
    assert state.webhooks[server.url()]["error"].startswith("HTTP 502")


def test_the_test_button_answers_without_calling_out(shop: Biz) -> None:
    from messages.alarms.webhooks import alarm_webhooks_deliver

    admin = client_for(make_user("hook-admin", superuser=True))
    with (
        dripping_server(every=0.5) as slow,
        override_settings(MQ_ALARM_WEBHOOK_HOSTS=["127.0.0.1:*"], MQ_ALARM_WEBHOOK_TIMEOUT_SECONDS=DEADLINE),
    ):
        Topic.objects.create(name="orders", biz=shop, alarm_webhooks=[{"url": slow.url(), "format": "slack"}])
        started = time.monotonic()
        response = admin.post("/topics/orders/alarm-test/", {"url": slow.url()})
        took = time.monotonic() - started
        assert response.status_code == 303
        assert slow.connections == 0 and took < DEADLINE, took  # the request thread called nobody
        page = admin.get("/topics/orders/").content.decode()
        assert "Test alarms" in page and 'hx-trigger="every 2s"' in page
        alarm_webhooks_deliver()  # the outbound worker's job
    page = admin.get("/topics/orders/").content.decode()
    assert f"http://{slow.host}/…" in page and "within 1.5 s" in page and 'hx-trigger="every 2s"' not in page
    test = Alarm.objects.get(kind="test")
    assert test.webhooks[slow.url()]["state"] == "failed"  # a test is sent once, without retries


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:9/check\r\nX-Injected: 1", "gopher://127.0.0.1:9/_", "http://127.0.0.1:9/a b"]
)
def test_a_check_url_with_control_characters_or_another_scheme_is_refused_at_the_door(
    producer_api: Any, url: str
) -> None:
    with override_settings(MQ_TRANSACTION_CHECK_HOSTS=["127.0.0.1:9"]):
        response = producer_api.post("/api/v1/messages", {
            "messages": [{"topic": "orders", "data": 1}], "transaction": {"check_url": url}})
    assert response.status_code == 400
    assert response.json()["error"]["details"]["field"] == "transaction.check_url"
    assert not Transaction.objects.exists() and not Message.objects.exists()


def test_check_hosts_may_be_allowed_per_business_line(producer_api: Any, shop: Biz, other_biz: Biz) -> None:
    from tests.conftest import make_api

    spec = {"messages": [{"topic": "orders", "data": 1}], "transaction": {"check_url": "http://checks.shop.example/c"}}
    with override_settings(MQ_TRANSACTION_CHECK_HOSTS=["shop=checks.shop.example"]):
        mine = producer_api.post("/api/v1/messages", spec)
        theirs = make_api(["produce:*"], other_biz).post(
            "/api/v1/messages", {**spec, "messages": [{"topic": "books", "data": 1}]})
    assert mine.status_code == 201, mine.content
    assert theirs.status_code == 400 and theirs.json()["error"]["details"]["field"] == "transaction.check_url"
