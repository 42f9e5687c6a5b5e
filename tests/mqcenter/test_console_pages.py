"""What the console shows and does: guards on every route, escaping, CSP, CSRF, partials,
keyset pages, edits, bulk jobs and dead-letter groups."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client, override_settings
from django.urls import URLPattern, URLResolver, get_resolver

from messages.models import Message, MessageTrace, Status
from messages.operations.bulk import bulk_job_run
from messages.operations.models import BulkJob
from tests.support.console import add_message, client_for, make_user
from topics.models import Biz, Topic

XSS = '{"name":"<script>alert(1)</script>","q":"\\"><img src=x onerror=alert(2)>"}'


def console_patterns() -> list[URLPattern]:
    found: list[URLPattern] = []

    def walk(patterns: list[Any], namespace: str | None) -> None:
        for p in patterns:
            if isinstance(p, URLResolver):
                walk(p.url_patterns, p.namespace or namespace)
            elif namespace == "console":
                found.append(p)

    walk(get_resolver().url_patterns, None)
    return found


def test_it_guards_every_console_route_with_a_role_check() -> None:
    patterns = console_patterns()
    assert len(patterns) > 20
    unguarded = [p.name for p in patterns if not getattr(p.callback, "console_role", None)]
    assert unguarded == []
    public = sorted(p.name for p in patterns if p.callback.console_role == "public")
    assert public == ["login", "logout"]


def test_it_escapes_message_data_everywhere(clients: dict[str, Client], orders: Topic) -> None:
    message = add_message("orders", Status.FAIL, key="<b>k</b>", data=XSS, log="<script>alert(3)</script>")
    MessageTrace.objects.create(message_id=message.id, event="nacked", actor="<i>c</i>", at=message.add_time,
                                log="<script>alert(4)</script>")
    admin = clients["admin"]
    for url in ("/messages/", f"/messages/{message.id}/", "/dead/", "/messages/?text=script"):
        body = admin.get(url).content.decode()
        assert "<script>alert" not in body and "<img src=x" not in body and "<b>k</b>" not in body, url
        assert "<i>c</i>" not in body
    detail = admin.get(f"/messages/{message.id}/").content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in detail
    assert "&lt;script&gt;alert(4)&lt;/script&gt;" in detail


def test_it_sends_a_csp_and_has_no_inline_script(clients: dict[str, Client], failed: Message) -> None:
    for url in ("/", "/messages/", f"/messages/{failed.id}/", "/topics/", "/dead/", "/registry/", "/tokens/",
                "/users/", "/audit/", "/biz/", "/jobs/", "/messages/add/", "/topics/+new/"):
        response = clients["admin"].get(url)
        assert response.status_code == 200, url
        csp = response["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp
        body = response.content.decode()
        for tag in re.findall(r"<script[^>]*>", body):
            assert "src=" in tag, (url, tag)
        assert " style=" not in body and "javascript:" not in body and " onclick=" not in body, url
        assert 'hx-headers=\'{"X-CSRFToken": "' in body


def test_it_refuses_posts_without_a_csrf_token(users: dict[str, Any], failed: Message) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(users["operator"])
    assert client.post(f"/messages/{failed.id}/redrive/").status_code == 403
    assert Message.objects.get(id=failed.id).status == Status.FAIL
    page = client.get(f"/messages/{failed.id}/").content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    assert client.post(f"/messages/{failed.id}/redrive/", {"csrfmiddlewaretoken": token}).status_code == 303
    # HTMX requests send the token in a header (set from <body hx-headers>)
    other = add_message("orders", Status.FAIL)
    response = client.post(f"/messages/{other.id}/redrive/", HTTP_X_CSRFTOKEN=token, HTTP_HX_REQUEST="true")
    assert response.status_code == 204 and response["HX-Redirect"] == f"/messages/{other.id}/"


def test_it_pages_newest_first_without_counting(clients: dict[str, Client], orders: Topic,
                                                django_assert_max_num_queries: Any) -> None:
    ids = [add_message("orders", Status.NEW, key=f"k{i}").id for i in range(55)]
    admin = clients["admin"]
    first = admin.get("/messages/?topic=orders", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="results")
    body = first.content.decode()
    assert "<html" not in body  # the partial only
    shown = [int(x) for x in re.findall(r'name="ids" value="(\d+)"', body)]
    assert shown == sorted(ids, reverse=True)[:50]
    older = re.search(r'href="(\?[^"]*cursor=[^"]+)"', body).group(1).replace("&amp;", "&")
    second = admin.get("/messages/" + older).content.decode()
    assert [int(x) for x in re.findall(r'name="ids" value="(\d+)"', second)] == sorted(ids, reverse=True)[50:]
    assert "End of results." in second
    with django_assert_max_num_queries(8) as captured:
        admin.get("/messages/?status=NEW")
    assert not any("COUNT(" in q["sql"].upper() for q in captured.captured_queries)


def test_it_filters_by_key_status_text_and_date(clients: dict[str, Client], failed: Message, waiting: Message) -> None:
    admin = clients["admin"]
    assert f'name="ids" value="{failed.id}"' in admin.get("/messages/?key=order-42").content.decode()
    assert f'name="ids" value="{waiting.id}"' not in admin.get("/messages/?key=order-42").content.decode()
    dead = admin.get("/messages/?status=FAIL,TIMEOUT").content.decode()
    assert f'name="ids" value="{failed.id}"' in dead and f'name="ids" value="{waiting.id}"' not in dead
    assert f'name="ids" value="{waiting.id}"' in admin.get("/messages/?text=43").content.decode()
    assert "No messages match." in admin.get("/messages/?added_after=2999-01-01T00:00").content.decode()
    assert f'name="ids" value="{failed.id}"' in admin.get(f"/messages/?id={failed.id}").content.decode()
    bad = admin.get("/messages/?added_after=yesterday").content.decode()
    assert "added_after" in bad and "No messages match." in bad


def test_it_edits_data_status_effect_time_and_retries(clients: dict[str, Client], failed: Message) -> None:
    response = clients["operator"].post(f"/messages/{failed.id}/edit/", {
        "data": '{"order": 42, "fixed": true}', "status": "NEW", "effect_time": "2030-01-02T03:04:05",
        "retry_remaining": "3",
    })
    assert response.status_code == 303
    failed.refresh_from_db()
    assert failed.data == '{"order":42,"fixed":true}' and failed.status == Status.NEW
    assert failed.effect_time.isoformat() == "2030-01-02T03:04:05+00:00" and failed.retry_remaining == 3
    page = clients["operator"].get(f"/messages/{failed.id}/").content.decode()
    # The trace's "Edited" shows what changed, before and after (from the audit).
    changes = page[page.index('class="diff trace-changes"'):]
    changes = changes[: changes.index("</table>")]
    assert re.search(r"<th>status</th><td class=\"before\">FAIL</td><td class=\"after\">NEW</td>", changes), changes
    assert "retry remaining" in changes and "effect time" in changes
    assert "Saved message" in page


def test_it_words_the_trace_as_an_operator_reads_it(clients: dict[str, Client], failed: Message) -> None:
    from django.utils import timezone

    now = timezone.now()
    MessageTrace.objects.create(message_id=failed.id, event="nacked", actor="host-a:1:c", at=now, attempt=1,
                                status_after=Status.RUNNING, log="bad card")
    MessageTrace.objects.create(message_id=failed.id, event="retry_scheduled", actor="host-a:1:c", at=now, attempt=1,
                                status_after=Status.NEW, log="retry at 2026-11-27T14:05:00.123456+00:00")
    response = clients["operator"].post("/messages/bulk/", {"action": "requeue", "ids": [str(failed.id)]})
    assert response.status_code == 303
    page = clients["operator"].get(f"/messages/{failed.id}/").content.decode()
    trace = page[page.index('id="trace"'):]
    trace = trace[: trace.index("</ol>")]
    assert "<strong>Requeued</strong>" in trace and "Redriven" not in trace and "<pre>requeue</pre>" not in trace
    nack = trace[trace.index("ev-nacked"):]
    nack = nack[: nack.index("</li>")]
    assert "s-RUNNING" not in nack  # a nack does not deliver it again
    assert "retry at 2026-11-27 14:05:00 UTC" in trace and ".123456" not in trace


def test_it_shows_the_ack_of_a_first_delivery_held_by_its_row(clients: dict[str, Client], orders: Topic) -> None:
    from tests.support.maintenance import consume, produce

    [message_id] = produce("orders", 1)
    consume("orders", 1)
    assert not MessageTrace.objects.filter(message_id=message_id).exists()
    page = clients["viewer"].get(f"/messages/{message_id}/").content.decode()
    trace = page[page.index('id="trace"'):]
    trace = trace[: trace.index("</ol>")]
    assert [m for m in re.findall(r'class="ev-(\w+)"', trace)] == ["produced", "pulled", "acked"]
    acked = trace[trace.index("ev-acked"):]
    acked = acked[: acked.index("</li>")]
    assert '<span class="mono">c1</span>' in acked and "attempt 1" in acked and "s-SUCCESS" in acked
    when = Message.objects.get(id=message_id).update_time.strftime("%Y-%m-%d %H:%M:%S.%f")[:23]
    assert f'<div class="when">{when} UTC</div>' in acked


def test_it_refuses_invalid_json_without_changing_the_message(clients: dict[str, Client], failed: Message) -> None:
    response = clients["operator"].post(f"/messages/{failed.id}/edit/", {"data": "{not json"})
    assert response.status_code == 400 and "valid JSON" in response.content.decode()
    failed.refresh_from_db()
    assert failed.data == '{"order":42}'


@override_settings(MQ_REDRIVE_SYNC_LIMIT=3)
def test_it_turns_a_large_filter_into_a_background_job_with_progress(clients: dict[str, Client], orders: Topic) -> None:
    for _ in range(5):
        add_message("orders", Status.FAIL, log="boom")
    response = clients["operator"].post("/messages/bulk/", {"action": "redrive", "scope": "filter", "topic": "orders",
                                                            "status": "FAIL"})
    assert response.status_code == 303 and response["Location"].startswith("/jobs/")
    job = BulkJob.objects.get()
    page = clients["operator"].get(response["Location"]).content.decode()
    assert "queued" in page and 'hx-trigger="every 1s"' in page and "<progress" in page
    bulk_job_run(job_id=job.id)  # what the Celery worker does (the browser test runs a real one)
    partial = clients["operator"].get(response["Location"], HTTP_HX_REQUEST="true", HTTP_HX_TARGET="progress")
    body = partial.content.decode()
    assert "<html" not in body and "Done: redrive of 5 messages" in body and "every 1s" not in body
    assert not Message.objects.filter(status=Status.FAIL).exists()


def test_it_groups_dead_letters_by_topic_group_and_reason(clients: dict[str, Client], orders: Topic) -> None:
    for _ in range(3):
        add_message("orders", Status.FAIL, log="ValueError: bad sku\nTraceback ...")
    add_message("orders", Status.TIMEOUT, log="lease expired")
    page = clients["viewer"].get("/dead/").content.decode()
    assert "ValueError: bad sku" in page and "lease expired" in page
    row = page[page.index('class="dead-group"'):]
    row = row[: row.index("</tr>")]
    assert re.search(r'<td class="num dead-count"[^>]*>3<', row) and "ValueError: bad sku</code>" in row
    assert "Redrive" not in page.split("<tbody>")[1]  # viewers get no buttons
    assert "Redrive 3" in clients["operator"].get("/dead/").content.decode()
    assert "Redrive all of orders" in clients["operator"].get("/dead/?topic=orders").content.decode()
    assert "Redrive all of orders" not in clients["viewer"].get("/dead/?topic=orders").content.decode()
    clients["operator"].post("/dead/group/redrive/", {"topic": "orders", "group": "billing",
                                                      "reason": "ValueError: bad sku"})
    assert Message.objects.filter(status=Status.NEW).count() == 3
    assert Message.objects.filter(status=Status.TIMEOUT).count() == 1


def test_it_adds_a_message_through_the_produce_service(clients: dict[str, Client], orders: Topic) -> None:
    response = clients["operator"].post("/messages/add/", {"topic": "orders", "group": "billing", "key": "k-1",
                                                           "data": '{"a": [1, 2]}', "delay_seconds": "60"})
    assert response.status_code == 303
    message = Message.objects.get(key="k-1")
    assert message.data == '{"a":[1,2]}' and message.retry_remaining == 2  # the topic's retries
    assert message.producer == "user:olga"  # its "produced" event (no trace row)
    bad = clients["operator"].post("/messages/add/", {"topic": "orders", "data": "nope"})
    assert bad.status_code == 400 and "valid JSON" in bad.content.decode()


def test_it_shows_a_token_secret_once(clients: dict[str, Client], shop: Any) -> None:
    response = clients["admin"].post("/tokens/", {"name": "svc", "biz": "shop", "scopes": "produce:orders* consume:orders*"})
    body = response.content.decode()
    secret = re.search(r'id="token-secret">(mq_[^<]+)<', body).group(1)
    assert response["Cache-Control"] == "no-store"
    assert secret not in clients["admin"].get("/tokens/").content.decode()
    api = Client().get("/api/v1/topics/orders", HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert api.status_code in (200, 404)  # the token works against the API
    from topics.models import ApiToken

    token = ApiToken.objects.get(name="svc")
    clients["admin"].post(f"/tokens/{token.id}/revoke/")
    assert Client().get("/api/v1/topics/orders", HTTP_AUTHORIZATION=f"Bearer {secret}").status_code == 401


def test_it_edits_every_topic_setting_and_groups(clients: dict[str, Client], orders: Topic) -> None:
    response = clients["admin"].post("/topics/orders/", {
        "biz": "shop", "owner": "ann", "description": "order events", "retry_count": "5",
        "retry_strategy": "exponential", "retry_interval_seconds": "30", "timeout_seconds": "120",
        "retention_days": "14", "alarm_emails": "a@example.org\nb@example.org", "backlog_alarm_threshold": "1000",
        "paused": "on", "group_name": ["billing", "audit"], "group_mode": ["serial", "sharded"],
    })
    assert response.status_code == 303
    orders.refresh_from_db()
    assert (orders.owner, orders.retry_count, orders.retry_strategy, orders.retry_interval_seconds,
            orders.timeout_seconds, orders.retention_days, orders.alarm_emails, orders.backlog_alarm_threshold,
            orders.paused) == ("ann", 5, "exponential", 30, 120, 14, ["a@example.org", "b@example.org"], 1000, True)
    assert dict(orders.groups.values_list("name", "mode")) == {"billing": "serial", "audit": "sharded"}
    bad = clients["admin"].post("/topics/orders/", {"biz": "shop", "alarm_emails": "not-an-email"})
    assert bad.status_code == 400 and "alarm_emails" in bad.content.decode()


@pytest.mark.parametrize("window", ["hour", "day", "week"])
def test_it_renders_the_dashboard_for_each_window(clients: dict[str, Client], failed: Message, waiting: Message,
                                                  window: str) -> None:
    body = clients["viewer"].get(f"/?window={window}").content.decode()
    assert 'id="total-NEW">1<' in body and 'id="total-dead">1<' in body
    assert f"/ws/console/dashboard?window={window}" in body


def test_it_pages_a_business_lines_messages_across_its_topics_in_id_order(
    clients: dict[str, Client], orders: Topic, foreign_topic: Topic, shop: Any,
) -> None:
    Topic.objects.create(name="refunds", biz=shop)
    mine = []
    for i in range(60):
        mine.append(add_message("orders" if i % 3 else "refunds", Status.NEW).id)
        add_message("payroll", Status.NEW)  # another business line's, interleaved
    viewer = clients["viewer"]
    body = viewer.get("/messages/").content.decode()
    # viewers have no checkboxes: read the ids from the detail links
    first = [int(x) for x in re.findall(r'<a href="/messages/(\d+)/">', body)]
    assert first == sorted(mine, reverse=True)[:50]
    older = re.search(r'href="(\?cursor=[^"]+)"', body).group(1)
    second = [int(x) for x in re.findall(r'<a href="/messages/(\d+)/">', viewer.get("/messages/" + older).content.decode())]
    assert second == sorted(mine, reverse=True)[50:]


def test_it_reads_backlogs_from_the_live_counters_and_rates_from_stats_buckets(
    clients: dict[str, Client], orders: Topic, failed: Message,
) -> None:
    from django.utils import timezone

    from messages.stats.flush import minute_of
    from messages.stats.live import live_reset
    from messages.stats.models import StatsBucket

    minute = minute_of(timezone.now())
    snapshot = {"deliverable": 700, "delayed": 7, "running": 2, "dead": 3, "oldest_deliverable_age_seconds": 42.0}
    StatsBucket.objects.create(topic="orders", group_name="billing", minute=minute, produced=50, succeeded=20,
                               failed=5, **snapshot)
    live_reset(snapshot={("orders", "billing"): snapshot}, at=timezone.now())  # as the flush job does
    page = clients["viewer"].get("/topics/").content.decode()
    assert "Counts live" in page and ">707<" in page  # waiting = deliverable + delayed
    assert ">10.0<" in page and ">5.0<" in page  # 50 produced, 25 consumed over 5 minutes
    dashboard = clients["viewer"].get("/").content.decode()
    assert 'id="total-NEW">707<' in dashboard and 'id="total-dead">3<' in dashboard
    assert 'id="total-produced">50<' in dashboard


def test_it_shows_a_topic_named_new_instead_of_the_create_form(shop: Biz) -> None:
    Topic.objects.create(name="new", biz=shop, description="a topic called new")
    admin = client_for(make_user("root-new", superuser=True))

    page = admin.get("/topics/new/")

    assert page.status_code == 200
    assert "a topic called new" in page.content.decode()


def test_it_shows_per_state_counts_of_the_filter_from_the_live_counters(clients: dict[str, Client], orders: Topic) -> None:
    for status in (Status.NEW, Status.NEW, Status.RUNNING, Status.FAIL, Status.EXPIRED, Status.SUCCESS):
        add_message("orders", status)
    page = clients["viewer"].get("/messages/?topic=orders").content.decode()
    counts = page[page.index('id="state-counts"'):]
    counts = counts[: counts.index("</p>")]
    assert "≈" not in counts  # topic (and group, status) only: the counters are this filter's counts
    assert 'class="state-1">2<' in counts and 'class="state-2">1<' in counts and 'class="state-3">2<' in counts
    assert "status=FAIL%2CTIMEOUT%2CEXPIRED" in counts
    narrowed = clients["viewer"].get("/messages/?topic=orders&key=k-1").content.decode()
    assert ">≈</span>" in narrowed[narrowed.index('id="state-counts"'):]  # an estimate, marked
