"""Times at the edges of the calendar, with offsets: a 400 naming the field, never a 500."""

from __future__ import annotations

from typing import Any

import pytest

from messages.models import Message
from tests.support.api import produce

EDGES = ["9999-12-31T23:59:59-10:00", "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59+00:00"]
pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("moment", EDGES)
def test_a_produce_with_an_edge_effect_time_answers_400(producer_api: Any, moment: str) -> None:
    response = producer_api.post("/api/v1/messages", {"messages": [{"topic": "orders", "data": 1, "effect_time": moment}]})

    assert response.status_code == 400
    assert response.json()["error"]["details"]["field"] == "messages[0].effect_time"
    assert not Message.objects.exists()


@pytest.mark.parametrize("moment", EDGES)
def test_an_edit_and_a_search_with_an_edge_time_answer_400(admin_api: Any, producer_api: Any, moment: str) -> None:
    [stored] = produce(producer_api, {"topic": "orders", "data": 1})

    edit = admin_api.patch(f"/api/v1/messages/{stored['id']}", {"effect_time": moment})
    search = admin_api.get("/api/v1/messages", {"added_after": moment})
    bulk = admin_api.post("/api/v1/messages/redrive", {"filter": {"added_before": moment}})

    assert [r.status_code for r in (edit, search, bulk)] == [400, 400, 400]


@pytest.mark.parametrize("field", ["since", "until"])
@pytest.mark.parametrize("moment", ["0001-01-01T00:00:00", "9999-12-31T23:59:59", "0001-01-01T00:00:00+14:00"])
def test_a_report_run_with_an_edge_time_answers_400_naming_the_field(field: str, moment: str) -> None:
    from reports.models import ReportRun
    from tests.support.console import client_for, make_user

    operator = client_for(make_user("edge-operator", superuser=True))
    response = operator.post("/reports/run/", {"kind": "heap", field: moment})

    assert response.status_code == 400, response.content[:300]
    assert field.encode() in response.content
    assert not ReportRun.objects.exists()
