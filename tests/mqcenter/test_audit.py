"""The audit log reads as operators think: targets by name with a link, the fields that
changed, and one row per action (a bulk action records its filter and count, not ids)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client, override_settings

from messages.models import Message, Status
from messages.operations.bulk import bulk_job_run
from mqcenter.models import AuditEntry
from tests.support.console import add_message
from topics.models import Topic

pytestmark = pytest.mark.django_db(transaction=True)  # bulk jobs start after commit


def _topic_form(**changes: str) -> dict[str, str]:
    return {
        "owner": "team-shop",
        "retry_count": "2",
        "retry_strategy": "fixed",
        "retry_interval_seconds": "10",
        "timeout_seconds": "60",
        "retention_days": "7",
        "alarm_emails": "",
        **changes,
    }


def test_it_names_the_target_with_a_link_and_shows_only_the_changed_fields(
    clients: dict[str, Client], orders: Topic
) -> None:
    admin = clients["admin"]
    assert admin.post("/topics/orders/", _topic_form(retry_count="5")).status_code == 303
    entry = AuditEntry.objects.get(action="topic.update")
    assert (entry.target_type, entry.target_name) == ("Topic", "orders")
    html = admin.get("/audit/?action=topic.").content.decode()
    assert '<a href="/topics/orders/">orders</a>' in html
    assert (
        '<tr><th>retry count</th><td class="before">2</td><td>→</td><td class="after">5</td></tr>'
        in html
    )
    assert "<th>retention days</th>" not in html  # unchanged fields are left out
    assert "{&#x27;" not in html and "{'" not in html  # no dict reprs
    assert admin.get("/audit/?target=orders").content.decode().count("topic.update") == 1


def test_it_shows_a_message_edit_as_a_field_diff_linking_the_message(
    clients: dict[str, Client], failed: Message
) -> None:
    clients["operator"].post(f"/messages/{failed.id}/edit/", {"data": '{"order": 99}'})
    html = clients["admin"].get("/audit/?action=message.edit").content.decode()
    assert f'<a href="/messages/{failed.id}/">message {failed.id} (orders/billing)</a>' in html
    assert (
        '<th>data</th><td class="before">{&quot;order&quot;:42}</td><td>→</td><td class="after">{&quot;order&quot;:99}</td>'
        in html
    )


def test_a_bulk_redrive_by_filter_is_one_row_with_its_filter_and_count(
    clients: dict[str, Client], orders: Topic
) -> None:
    ids = [add_message("orders", Status.FAIL, log="boom").id for _ in range(3)]
    response = clients["operator"].post(
        "/messages/bulk/",
        {"action": "redrive", "scope": "filter", "topic": "orders", "status": "FAIL,TIMEOUT"},
    )
    assert response.status_code == 303
    [entry] = AuditEntry.objects.filter(action="message.redrive")
    assert entry.after == {"filter": {"topic": "orders", "status": ["FAIL", "TIMEOUT"]}, "count": 3}
    assert entry.target_name == "3 messages"
    html = clients["admin"].get("/audit/").content.decode()
    assert "topic orders · status FAIL or TIMEOUT" in html
    assert all(str(i) not in entry.after.values() for i in ids)


@override_settings(MQ_REDRIVE_SYNC_LIMIT=2)
def test_a_bulk_job_is_one_row_whatever_its_batches(
    clients: dict[str, Client], orders: Topic, monkeypatch: Any
) -> None:
    from messages.operations import bulk as operations

    monkeypatch.setattr(operations, "BULK_BATCH", 2)  # several batches for 5 messages
    for _ in range(5):
        add_message("orders", Status.FAIL, log="boom")
    response = clients["operator"].post(
        "/messages/bulk/",
        {"action": "redrive", "scope": "filter", "topic": "orders", "status": "FAIL"},
    )
    job_id = int(response["Location"].rstrip("/").rsplit("/", 1)[1])
    job = bulk_job_run(job_id=job_id)
    assert job.processed == 5
    [entry] = AuditEntry.objects.all()
    assert entry.action == "bulk.redrive" and entry.after == {
        "filter": {"topic": "orders", "status": ["FAIL"]}
    }
    html = clients["admin"].get("/audit/").content.decode()
    assert f'<a href="/jobs/{job_id}/">redrive job {job_id}</a>' in html
    assert "5 of 5 messages · done" in html
    jobs = clients["operator"].get("/jobs/").content.decode()
    assert '<td class="job-filter">topic orders · status FAIL</td>' in jobs


def test_a_dead_letter_group_action_records_the_group_not_its_ids(
    clients: dict[str, Client], orders: Topic
) -> None:
    for n in range(3):
        add_message("orders", Status.FAIL, log=f"bad payload for item {n}")
    groups = clients["operator"].get("/dead/").content.decode()
    assert "bad payload for item" in groups
    from messages.operations.dead_letters import dead_letter_groups

    [group], _ = dead_letter_groups(principal=_admin_principal(), topic="orders")
    response = clients["operator"].post(
        "/dead/group/redrive/", {"topic": "orders", "group": "billing", "reason": group["reason"]}
    )
    assert response.status_code == 303
    [entry] = AuditEntry.objects.filter(action="message.redrive")
    assert entry.after["count"] == 3 and entry.after["filter"]["reason"] == group["reason"]
    assert "ids" not in entry.after


def _admin_principal() -> Any:
    from mqcenter.core.auth import Principal

    return Principal(name="test", scopes=("admin",), biz_ids=None)
