"""Every console page and action, for each of {anonymous, viewer, operator of another business line,
operator, admin}: who gets in, and that refused writes change nothing."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from messages.models import Message, Status
from messages.operations.models import BulkJob
from messages.schedules.models import Schedule
from mqcenter.models import AuditEntry
from tests.support.archive import archive_messages
from tests.support.console import add_message
from topics.models import ApiToken, Biz, Topic

ROLES = ["anonymous", "viewer", "outsider", "operator", "admin"]
OK, DENY = "ok", "deny"
# Acting on ids or a filter reaches only the visible messages: a business line's outsider
# is answered "0 messages" and nothing changes.
NOOP = "noop"
HOOK = "http://127.0.0.1:9/alarm-hook"  # orders' alarm webhook

READS: list[tuple[str, dict[str, str]]] = [
    # url template, expectation per role (anonymous always goes to the login page)
    ("/", {"viewer": OK, "outsider": OK, "operator": OK, "admin": OK}),
    ("/messages/", {"viewer": OK, "outsider": OK, "operator": OK, "admin": OK}),
    ("/messages/?status=FAIL,TIMEOUT&topic=orders", {"viewer": OK, "outsider": OK, "operator": OK, "admin": OK}),
    ("/messages/{failed}/", {"viewer": OK, "outsider": DENY, "operator": OK, "admin": OK}),
    ("/messages/add/", {"viewer": DENY, "outsider": OK, "operator": OK, "admin": OK}),
    ("/dead/", {"viewer": OK, "outsider": OK, "operator": OK, "admin": OK}),
    ("/archive/", {"viewer": OK, "outsider": OK, "operator": OK, "admin": OK}),
    ("/archive/?topic=orders&finished_after=2020-01-01T00:00", {"viewer": OK, "outsider": OK, "operator": OK, "admin": OK}),
    ("/archive/{archived}/", {"viewer": OK, "outsider": DENY, "operator": OK, "admin": OK}),
    ("/schedules/", {"viewer": OK, "outsider": OK, "operator": OK, "admin": OK}),
    ("/schedules/{schedule}/", {"viewer": DENY, "outsider": DENY, "operator": OK, "admin": OK}),
    ("/transactions/", {"viewer": OK, "outsider": OK, "operator": OK, "admin": OK}),
    ("/dead/group/export/?topic=orders&group=billing&reason=ValueError:+bad+sku",
     {"viewer": OK, "outsider": OK, "operator": OK, "admin": OK}),
    ("/charts/series.json?range=24h", {"viewer": OK, "outsider": OK, "operator": OK, "admin": OK}),
    # Another line's topic: the series of a topic that does not exist.
    ("/charts/series.json?topic=orders", {"viewer": OK, "outsider": "as-missing", "operator": OK, "admin": OK}),
    ("/topics/orders/groups/billing/", {"viewer": OK, "outsider": DENY, "operator": OK, "admin": OK}),
    ("/scheduled/", {"viewer": OK, "outsider": OK, "operator": OK, "admin": OK}),
    ("/retrying/", {"viewer": OK, "outsider": OK, "operator": OK, "admin": OK}),
    ("/in-flight/", {"viewer": OK, "outsider": OK, "operator": OK, "admin": OK}),
    ("/maintenance/", {"viewer": OK, "outsider": OK, "operator": OK, "admin": OK}),
    ("/alarms/", {"viewer": OK, "outsider": OK, "operator": OK, "admin": OK}),
    ("/jobs/", {"viewer": OK, "outsider": OK, "operator": OK, "admin": OK}),
    ("/jobs/{job}/", {"viewer": DENY, "outsider": DENY, "operator": DENY, "admin": OK}),
    ("/topics/", {"viewer": OK, "outsider": OK, "operator": OK, "admin": OK}),
    ("/topics/orders/", {"viewer": OK, "outsider": DENY, "operator": OK, "admin": OK}),
    ("/topics/+new/", {"viewer": DENY, "outsider": DENY, "operator": DENY, "admin": OK}),
    ("/registry/", {"viewer": OK, "outsider": OK, "operator": OK, "admin": OK}),
    ("/biz/", {"viewer": DENY, "outsider": DENY, "operator": DENY, "admin": OK}),
    ("/biz/{shop}/", {"viewer": DENY, "outsider": DENY, "operator": DENY, "admin": OK}),
    ("/tokens/", {"viewer": DENY, "outsider": DENY, "operator": DENY, "admin": OK}),
    ("/users/", {"viewer": DENY, "outsider": DENY, "operator": DENY, "admin": OK}),
    ("/users/{viewer_id}/", {"viewer": DENY, "outsider": DENY, "operator": DENY, "admin": OK}),
    ("/audit/", {"viewer": DENY, "outsider": DENY, "operator": DENY, "admin": OK}),
    ("/password/", {"viewer": OK, "outsider": OK, "operator": OK, "admin": OK}),
]


@pytest.fixture
def world(users: dict[str, Any], clients: dict[str, Any], failed: Message, waiting: Message, shop: Biz,
          foreign_topic: Topic) -> dict[str, Any]:
    from mqcenter.models import ConsoleGrant
    from tests.support.console import make_user
    from topics.services import token_create

    Topic.objects.filter(name="orders").update(alarm_webhooks=[{"url": HOOK, "format": "generic"}])
    job = BulkJob.objects.create(kind="redrive", filter={"topic": "orders"}, actor="user:ada", biz_ids=None)
    archived = add_message("orders", Status.SUCCESS, data='{"old":1}')
    archive_messages([archived.id])
    Topic.objects.create(name="drained", biz=shop)
    empty = Biz.objects.create(name="empty")
    _, token = token_create(actor="test", scopes=["produce:orders*"], biz=shop, name="shop-producer")
    target = make_user("tim", "viewer", shop)
    schedule = Schedule.objects.create(name="hourly", biz=shop, topic="orders", cron="0 * * * *",
                                       next_run_at=timezone.now() + timedelta(hours=1))
    return {"archived": archived.id, "schedule": schedule.id, "failed": failed.id, "waiting": waiting.id, "shop": shop.id, "job": job.id, "empty": empty.id,
            "viewer_id": users["viewer"].id, "token": token.id, "target": target.id,
            "grant": ConsoleGrant.objects.get(user=target).id, "clients": clients}


def check(response: Any, expected: str, role: str) -> None:
    if role == "anonymous":
        assert response.status_code in (302, 401), response.status_code
        assert "/login/" in (response.get("Location") or response.get("HX-Redirect") or "")
    elif expected == OK:
        assert response.status_code in (200, 302, 303), (response.status_code, response.content[:300])
        if response.status_code in (302, 303):
            assert "/login/" not in response["Location"]
    elif expected == NOOP:
        assert response.status_code in (303, 403, 404), (response.status_code, response.content[:300])
    else:
        assert response.status_code in (403, 404), (response.status_code, response.content[:300])


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize(("url", "expect"), READS, ids=[r[0] for r in READS])
def test_it_lets_each_role_read_only_its_pages(world: dict[str, Any], role: str, url: str, expect: dict[str, str]) -> None:
    response = world["clients"][role].get(url.format(**world))
    if expect.get(role) == "as-missing":
        missing = world["clients"][role].get(url.format(**world).replace("orders", "nosuchtopic"))
        def without_times(answer: Any) -> Any:  # the two may straddle a minute
            return {k: v for k, v in answer.json().items() if k != "t"}

        assert response.status_code == missing.status_code == 200
        assert without_times(response) == without_times(missing)
        return
    check(response, expect.get(role, DENY), role)


def test_it_shows_the_login_page_to_anonymous_users(client: Any, db: Any) -> None:
    response = client.get("/login/")
    assert response.status_code == 200
    assert b'name="password"' in response.content


# --- writes ------------------------------------------------------------------------------

OPERATORS = {"operator": OK, "admin": OK}
SCOPED = {"operator": OK, "admin": OK, "outsider": NOOP}
ADMINS = {"admin": OK}


def _edit(w: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return f"/messages/{w['failed']}/edit/", {"data": '{"order": 99}', "status": "", "retry_remaining": "0"}


WRITES: list[tuple[str, Any, dict[str, str], Any]] = [
    # name, (world -> url, form), who may, (world -> did it happen?)
    ("edit", _edit, OPERATORS, lambda w: Message.objects.get(id=w["failed"]).data == '{"order":99}'),
    ("redrive", lambda w: (f"/messages/{w['failed']}/redrive/", {}), OPERATORS,
     lambda w: Message.objects.get(id=w["failed"]).status == Status.NEW),
    ("requeue", lambda w: (f"/messages/{w['failed']}/requeue/", {}), OPERATORS,
     lambda w: Message.objects.get(id=w["failed"]).status == Status.NEW),
    ("delete", lambda w: (f"/messages/{w['failed']}/delete/", {}), OPERATORS,
     lambda w: not Message.objects.filter(id=w["failed"]).exists()),
    ("cancel", lambda w: (f"/messages/{w['waiting']}/cancel/", {}), OPERATORS,
     lambda w: Message.objects.get(id=w["waiting"]).status == Status.CANCELLED),
    ("bulk-cancel", lambda w: ("/messages/bulk/", {"action": "cancel", "scope": "selected", "ids": [w["waiting"]]}),
     SCOPED, lambda w: Message.objects.get(id=w["waiting"]).status == Status.CANCELLED),
    ("schedule-create", lambda w: ("/schedules/", {"name": "nightly", "topic": "orders", "data": "{}",
                                                   "cron": "0 2 * * *", "timezone": "Asia/Shanghai", "enabled": "on"}),
     OPERATORS, lambda w: Schedule.objects.filter(name="nightly").exists()),
    ("schedule-edit", lambda w: (f"/schedules/{w['schedule']}/", {"name": "hourly", "topic": "orders", "data": "{}",
                                                                  "cron": "30 * * * *", "timezone": "UTC"}),
     OPERATORS, lambda w: Schedule.objects.get(id=w["schedule"]).cron == "30 * * * *"),
    ("schedule-run", lambda w: (f"/schedules/{w['schedule']}/run/", {}), OPERATORS,
     lambda w: Schedule.objects.get(id=w["schedule"]).last_message_id is not None),
    ("schedule-disable", lambda w: (f"/schedules/{w['schedule']}/disable/", {}), OPERATORS,
     lambda w: not Schedule.objects.get(id=w["schedule"]).enabled),
    ("schedule-delete", lambda w: (f"/schedules/{w['schedule']}/delete/", {}), OPERATORS,
     lambda w: not Schedule.objects.filter(id=w["schedule"]).exists()),
    ("bulk-ids", lambda w: ("/messages/bulk/", {"action": "redrive", "scope": "selected", "ids": [w["failed"]]}),
     SCOPED, lambda w: Message.objects.get(id=w["failed"]).status == Status.NEW),
    ("bulk-filter", lambda w: ("/messages/bulk/", {"action": "delete", "scope": "filter", "topic": "orders"}),
     SCOPED, lambda w: not Message.objects.filter(topic="orders").exists()),
    ("dead-group-redrive", lambda w: ("/dead/group/redrive/", {"topic": "orders", "group": "billing",
                                                               "reason": "ValueError: bad sku"}),
     SCOPED, lambda w: Message.objects.get(id=w["failed"]).status == Status.NEW),
    ("dead-group-delete", lambda w: ("/dead/group/delete/", {"topic": "orders", "group": "billing",
                                                             "reason": "ValueError: bad sku"}),
     SCOPED, lambda w: not Message.objects.filter(id=w["failed"]).exists()),
    ("dead-topic", lambda w: ("/dead/redrive/", {"topic": "orders"}),
     SCOPED, lambda w: Message.objects.get(id=w["failed"]).status == Status.NEW),
    ("archive-redrive", lambda w: ("/archive/redrive/", {"ids": [w["archived"]]}), SCOPED,
     lambda w: Message.objects.filter(headers__has_key="mq-replay-of").exists()),
    ("archive-redrive-filter", lambda w: ("/archive/redrive/", {"scope": "filter", "topic": "orders"}), SCOPED,
     lambda w: Message.objects.filter(headers__has_key="mq-replay-of").exists()),
    ("bulk-move", lambda w: ("/messages/bulk/", {"action": "move", "scope": "selected", "ids": [w["waiting"]],
                                                 "to_topic": "orders", "to_group": "parked"}),
     SCOPED, lambda w: Message.objects.filter(group_name="parked").exists()),
    ("add", lambda w: ("/messages/add/", {"topic": "orders", "data": '{"new": true}', "group": "billing"}),
     OPERATORS, lambda w: Message.objects.filter(topic="orders", data='{"new":true}').exists()),
    ("topic-create", lambda w: ("/topics/+new/", {"topic": "refunds", "biz": "shop", "retry_count": "1",
                                                 "retry_strategy": "fixed", "retention_days": "3"}),
     ADMINS, lambda w: Topic.objects.filter(name="refunds").exists()),
    ("topic-edit", lambda w: ("/topics/orders/", {"biz": "shop", "retry_count": "7", "retry_strategy": "linear",
                                                  "alarm_emails": "ops@example.org", "backlog_alarm_threshold": "100"}),
     ADMINS, lambda w: Topic.objects.get(name="orders").retry_count == 7),
    ("topic-pause", lambda w: ("/topics/orders/pause/", {"paused": "1"}), ADMINS,
     lambda w: Topic.objects.get(name="orders").paused),
    # No host is allowed in the test settings: the test alarm fails before any connection.
    ("topic-alarm-test", lambda w: ("/topics/orders/alarm-test/", {"url": HOOK}), ADMINS,
     lambda w: AuditEntry.objects.filter(action="topic.alarm_test").exists()),
    ("biz-create", lambda w: ("/biz/", {"name": "logistics", "title": "Logistics"}), ADMINS,
     lambda w: Biz.objects.filter(name="logistics").exists()),
    ("biz-edit", lambda w: (f"/biz/{w['shop']}/", {"title": "Web shop"}), ADMINS,
     lambda w: Biz.objects.get(name="shop").title == "Web shop"),
    ("token-create", lambda w: ("/tokens/", {"name": "svc", "biz": "shop", "scopes": "produce:orders*"}), ADMINS,
     lambda w: ApiToken.objects.filter(name="svc").exists()),
    ("user-create", lambda w: ("/users/", {"username": "newbie", "password": "another-long-pass-77", "role": "viewer"}),
     ADMINS, lambda w: User.objects.filter(username="newbie").exists()),
    ("topic-delete", lambda w: ("/topics/drained/delete/", {}), ADMINS,
     lambda w: not Topic.objects.filter(name="drained").exists()),
    ("biz-delete", lambda w: (f"/biz/{w['empty']}/", {"delete": "1"}), ADMINS,
     lambda w: not Biz.objects.filter(name="empty").exists()),
    ("token-revoke", lambda w: (f"/tokens/{w['token']}/revoke/", {}), ADMINS,
     lambda w: ApiToken.objects.get(id=w["token"]).revoked_at is not None),
    ("user-deactivate", lambda w: (f"/users/{w['target']}/", {"op": "deactivate"}), ADMINS,
     lambda w: not User.objects.get(id=w["target"]).is_active),
    ("grant-remove", lambda w: (f"/users/{w['target']}/", {"op": "revoke", "grant": str(w["grant"])}), ADMINS,
     lambda w: not User.objects.get(id=w["target"]).console_grants.exists()),
    ("grant-add", lambda w: (f"/users/{w['viewer_id']}/", {"op": "grant", "role": "operator", "biz": str(w["shop"])}),
     ADMINS, lambda w: User.objects.get(id=w["viewer_id"]).console_grants.filter(role="operator").exists()),
]


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize(("name", "request_of", "who", "happened"), WRITES, ids=[w[0] for w in WRITES])
def test_it_lets_only_the_right_roles_act(world: dict[str, Any], role: str, name: str, request_of: Any,
                                          who: dict[str, str], happened: Any) -> None:
    url, form = request_of(world)
    audit_before = AuditEntry.objects.count()
    response = world["clients"][role].post(url, form)
    check(response, who.get(role, DENY), role)
    if who.get(role) == OK:
        assert happened(world), f"{name} by {role} did not happen"
        assert AuditEntry.objects.count() > audit_before, "the action was not audited"
    else:
        assert not happened(world), f"{name} by {role} happened although refused"


def test_it_hides_another_business_lines_messages_from_lists(world: dict[str, Any], foreign_topic: Topic) -> None:
    add_message("payroll", Status.FAIL, key="salary-7", log="payroll broke")
    outsider = world["clients"]["outsider"]
    for url in ("/messages/", "/dead/", "/topics/", "/"):
        body = outsider.get(url).content.decode()
        assert "order-42" not in body and "orders" not in body, url
    assert "No messages match." in outsider.get("/messages/?key=order-42").content.decode()
    export = outsider.get("/dead/group/export/?topic=orders&group=billing&reason=ValueError:+bad+sku")
    assert b"".join(export.streaming_content) == b""
    body = world["clients"]["viewer"].get("/messages/").content.decode()
    assert "order-42" in body and "salary-7" not in body
    assert "payroll" not in world["clients"]["viewer"].get("/dead/").content.decode()


def test_it_lets_a_viewer_with_an_operator_grant_elsewhere_change_only_that_line(
    world: dict[str, Any], users: dict[str, Any], other: Biz, foreign_topic: Topic,
) -> None:
    from mqcenter.models import ConsoleGrant

    ConsoleGrant.objects.create(user=users["viewer"], role="operator", biz=other)
    foreign = add_message("payroll", Status.FAIL, key="salary-8")
    viewer = world["clients"]["viewer"]
    assert viewer.post(f"/messages/{world['failed']}/redrive/").status_code == 403
    assert Message.objects.get(id=world["failed"]).status == Status.FAIL
    assert viewer.post(f"/messages/{foreign.id}/redrive/").status_code == 303
    assert Message.objects.get(id=foreign.id).status == Status.NEW


def test_it_refuses_an_htmx_partial_to_a_user_without_the_role(world: dict[str, Any]) -> None:
    response = world["clients"]["viewer"].post(
        "/messages/bulk/", {"action": "delete", "scope": "filter", "topic": "orders"},
        HTTP_HX_REQUEST="true", HTTP_HX_TARGET="results",
    )
    assert response.status_code == 403
    assert response["HX-Retarget"] == "#flash"
    assert Message.objects.filter(topic="orders").count() == 2
    anonymous = world["clients"]["anonymous"].get("/messages/", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="results")
    assert anonymous.status_code == 401 and "/login/" in anonymous["HX-Redirect"]


def test_it_signs_in_and_out_with_a_password(world: dict[str, Any], client: Any) -> None:
    response = client.post("/login/", {"username": "olga", "password": "a-long-test-password-42"})
    assert response.status_code == 302 and response["Location"] == "/"
    assert client.get("/").status_code == 200
    assert client.post("/logout/").status_code == 302
    assert client.get("/").status_code == 302


def test_it_changes_a_password(world: dict[str, Any], users: dict[str, Any]) -> None:
    client = world["clients"]["operator"]
    response = client.post("/password/", {"old_password": "a-long-test-password-42",
                                          "new_password1": "fresh-password-for-olga-9",
                                          "new_password2": "fresh-password-for-olga-9"})
    assert response.status_code == 302
    users["operator"].refresh_from_db()
    assert users["operator"].check_password("fresh-password-for-olga-9")


def test_it_keeps_deactivated_users_out(world: dict[str, Any], users: dict[str, Any]) -> None:
    admin = world["clients"]["admin"]
    assert admin.post(f"/users/{users['operator'].id}/", {"op": "deactivate"}).status_code == 303
    assert world["clients"]["operator"].get("/").status_code == 302


def test_it_records_edits_in_the_audit_log_with_before_and_after(world: dict[str, Any]) -> None:
    world["clients"]["operator"].post(*_edit(world))
    entry = AuditEntry.objects.filter(action="message.edit").latest("id")
    assert entry.actor == "user:olga"
    assert entry.before["data"] == '{"order":42}' and entry.after["data"] == '{"order":99}'
    page = world["clients"]["admin"].get("/audit/?action=message.").content.decode()
    assert "user:olga" in page and "message.edit" in page
    assert json.loads(json.dumps(entry.after))["data"] == '{"order":99}'
