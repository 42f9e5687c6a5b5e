"""Console forms keep what was typed and show each validation error beside its field."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings

from messages.models import Message
from topics.models import ApiToken, Biz, Topic

pytestmark = pytest.mark.django_db


def _field_error(html: str, element_id: str) -> str:
    found = re.search(
        rf'<div class="field-error[^"]*" id="{element_id}-error" role="alert">([^<]*)</div>', html
    )
    assert found, f"no error beside #{element_id}"
    return found.group(1)


def _value(html: str, element_id: str) -> str:
    found = re.search(rf'<input id="{element_id}"[^>]*value="([^"]*)"', html)
    assert found, f"no #{element_id} with a value"
    return found.group(1)


def test_it_keeps_invalid_json_in_the_edit_form_with_the_error_beside_it(
    clients: dict[str, Client], failed: Message
) -> None:
    typed = '{"order": 42, "note": "<b>half typed"'
    response = clients["operator"].post(
        f"/messages/{failed.id}/edit/", {"data": typed, "retry_remaining": "4"}
    )
    html = response.content.decode()
    assert response.status_code == 400
    assert (
        '<textarea id="e-data" name="data" class="full" aria-invalid="true" aria-describedby="e-data-error">'
        "{&quot;order&quot;: 42, &quot;note&quot;: &quot;&lt;b&gt;half typed&quot;</textarea>"
        in html
    )
    assert _field_error(html, "e-data").startswith("data must be valid JSON")
    assert _value(html, "e-retries") == "4"
    failed.refresh_from_db()
    assert failed.data == '{"order":42}' and failed.retry_remaining == 0


@override_settings(MQ_MAX_DATA_BYTES=64)
def test_it_keeps_data_over_the_size_limit_with_the_error_beside_it(
    clients: dict[str, Client], failed: Message
) -> None:
    typed = '{"blob": "' + "x" * 100 + '"}'
    response = clients["operator"].post(f"/messages/{failed.id}/edit/", {"data": typed})
    html = response.content.decode()
    assert response.status_code == 400
    assert "x" * 100 in html
    assert _field_error(html, "e-data") == "data is larger than 64 bytes."


def test_it_keeps_the_edit_when_a_number_is_refused(
    clients: dict[str, Client], failed: Message
) -> None:
    response = clients["operator"].post(
        f"/messages/{failed.id}/edit/", {"data": '{"order": 43}', "retry_remaining": "lots"}
    )
    html = response.content.decode()
    assert response.status_code == 400
    assert _field_error(html, "e-retries") == "retry_remaining must be a whole number."
    assert "{&quot;order&quot;: 43}</textarea>" in html and _value(html, "e-retries") == "lots"


def test_it_keeps_the_add_form_on_invalid_json_and_on_a_bad_topic(
    clients: dict[str, Client], orders: Topic
) -> None:
    response = clients["operator"].post(
        "/messages/add/", {"topic": "orders", "key": "k-1", "data": "{nope"}
    )
    html = response.content.decode()
    assert response.status_code == 400
    assert _field_error(html, "a-data").startswith("data must be valid JSON")
    assert (
        _value(html, "a-topic") == "orders"
        and _value(html, "a-key") == "k-1"
        and ">{nope</textarea>" in html
    )
    response = clients["operator"].post(
        "/messages/add/", {"topic": "bad name!", "key": "k-2", "data": "{}"}
    )
    html = response.content.decode()
    assert response.status_code == 400
    assert "must match" in _field_error(html, "a-topic")
    assert _value(html, "a-topic") == "bad name!" and _value(html, "a-key") == "k-2"
    assert not Message.objects.filter(key__in=["k-1", "k-2"]).exists()


def test_it_keeps_a_new_topic_form_with_the_error_beside_the_bad_field(
    clients: dict[str, Client], shop: Biz
) -> None:
    response = clients["admin"].post(
        "/topics/+new/",
        {
            "topic": "invoices",
            "biz": "shop",
            "owner": "team-billing",
            "retry_count": "3",
            "retry_strategy": "fixed",
            "retry_interval_seconds": "10",
            "timeout_seconds": "60",
            "retention_days": "7",
            "alarm_emails": "ops@example.org\nnot-an-address",
            "group_name": "billing",
            "group_mode": "serial",
        },
    )
    html = response.content.decode()
    assert response.status_code == 400
    assert "valid email" in _field_error(html, "t-ae")
    assert _value(html, "t-name") == "invoices" and _value(html, "t-owner") == "team-billing"
    assert ">ops@example.org\nnot-an-address</textarea>" in html
    assert 'value="billing"' in html and '<option value="serial" selected>' in html
    assert '<option value="shop" selected>' in html
    assert not Topic.objects.filter(name="invoices").exists()


def test_it_keeps_a_topic_edit_with_the_error_beside_the_bad_field(
    clients: dict[str, Client], orders: Topic
) -> None:
    response = clients["admin"].post(
        "/topics/orders/",
        {
            "owner": "someone-new",
            "retry_count": "5000",
            "retry_strategy": "fixed",
            "retry_interval_seconds": "10",
            "timeout_seconds": "60",
            "retention_days": "7",
            "alarm_emails": "",
        },
    )
    html = response.content.decode()
    assert response.status_code == 400
    assert "1000" in _field_error(html, "t-rc")
    assert _value(html, "t-owner") == "someone-new" and _value(html, "t-rc") == "5000"
    orders.refresh_from_db()
    assert orders.owner != "someone-new" and orders.retry_count == 2


def test_it_keeps_the_user_form_but_never_the_password(
    clients: dict[str, Client], shop: Biz
) -> None:
    response = clients["admin"].post(
        "/users/",
        {
            "username": "newbie",
            "email": "newbie@example.org",
            "password": "short",
            "role": "viewer",
            "biz": str(shop.id),
        },
    )
    html = response.content.decode()
    assert response.status_code == 400
    assert "too short" in _field_error(html, "u-pass")
    assert _value(html, "u-name") == "newbie" and _value(html, "u-email") == "newbie@example.org"
    assert (
        '<option value="viewer" selected>' in html
        and f'<option value="{shop.id}" selected>' in html
    )
    assert "short" not in re.search(r'<input id="u-pass"[^>]*>', html).group(0)  # type: ignore[union-attr]
    assert not User.objects.filter(username="newbie").exists()


def test_it_keeps_the_token_form_with_the_scope_error_beside_it(
    clients: dict[str, Client], shop: Biz
) -> None:
    response = clients["admin"].post(
        "/tokens/", {"name": "order-service", "biz": "shop", "scopes": "produce:orders* eat:cake"}
    )
    html = response.content.decode()
    assert response.status_code == 400
    assert "eat:cake" in _field_error(html, "k-scopes")
    assert (
        _value(html, "k-name") == "order-service"
        and _value(html, "k-scopes") == "produce:orders* eat:cake"
    )
    assert '<option value="shop" selected>' in html
    assert not ApiToken.objects.filter(name="order-service").exists()


def test_it_keeps_the_business_line_form(clients: dict[str, Client], users: Any) -> None:
    response = clients["admin"].post(
        "/biz/", {"name": "bad name!", "title": "Bad", "description": "kept"}
    )
    html = response.content.decode()
    assert response.status_code == 400
    assert _field_error(html, "b-name")
    assert _value(html, "b-name") == "bad name!" and _value(html, "b-desc") == "kept"


def test_it_keeps_the_schedule_form_with_the_error_beside_the_bad_field(clients: dict[str, Client], orders: Topic) -> None:
    response = clients["operator"].post("/schedules/", {"name": "nightly", "topic": "orders", "cron": "every night",
                                                        "timezone": "UTC", "data": '{"run": 1}'})
    html = response.content.decode()
    assert response.status_code == 400
    assert _field_error(html, "s-cron")
    assert _value(html, "s-name") == "nightly" and _value(html, "s-cron") == "every night"
    response = clients["operator"].post("/schedules/", {"name": "nightly", "topic": "orders", "cron": "0 2 * * *",
                                                        "timezone": "UTC", "data": "{run"})
    html = response.content.decode()
    assert _field_error(html, "s-data").startswith("data must be valid JSON") and ">{run</textarea>" in html
