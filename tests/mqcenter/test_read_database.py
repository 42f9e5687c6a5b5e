"""DATABASE_READ_URL: the console's lists (messages, archive, alarms, audit), the dashboard,
the charts, the stats and the Spark reports read the read database; a message's detail right after an edit, and every write,
use the writer. The test settings give the read database as a second connection to the test
database, so each query's connection shows where it went."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

from messages.models import Message
from tests.conftest import make_api
from topics.models import Biz

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "read"])


@pytest.fixture
def read_database(settings: Any) -> None:
    settings.MQ_READ_DATABASE = "read"


def queries(alias: str) -> CaptureQueriesContext:
    return CaptureQueriesContext(connections[alias])


@pytest.mark.parametrize("path", ["/messages/", "/messages/?topic=orders", "/scheduled/", "/retrying/",
                                  "/in-flight/", "/", "/charts/series.json?range=1h", "/archive/",
                                  "/archive/?topic=orders"])
def test_console_lists_and_the_dashboard_read_the_read_database(
    read_database: None, clients: Any, failed: Message, path: str
) -> None:
    with queries("read") as on_read, queries("default") as on_writer:
        response = clients["viewer"].get(path)

    assert response.status_code == 200, path
    assert on_read.captured_queries, f"{path} read nothing from the read database"
    assert not [q for q in on_writer.captured_queries if "mq_message" in q["sql"]], \
        f"{path} read messages from the writer"


@pytest.mark.parametrize(("client", "path", "table"), [("viewer", "/alarms/", "mq_alarm"),
                                                      ("admin", "/audit/", "mq_audit")])
def test_the_alarm_history_and_the_audit_log_read_the_read_database(
    read_database: None, clients: Any, failed: Message, client: str, path: str, table: str
) -> None:
    with queries("read") as on_read, queries("default") as on_writer:
        response = clients[client].get(path)

    assert response.status_code == 200, path
    assert any(table in q["sql"] for q in on_read.captured_queries), f"{path} did not read {table} there"
    assert not [q for q in on_writer.captured_queries if table in q["sql"]], f"{path} read {table} from the writer"


def test_the_list_shows_what_the_read_database_holds(read_database: None, clients: Any, failed: Message) -> None:
    response = clients["viewer"].get("/messages/")

    assert str(failed.id) in response.content.decode()


def test_a_message_page_after_an_edit_reads_the_writer(read_database: None, clients: Any, failed: Message) -> None:
    with queries("read") as on_read:
        edit = clients["operator"].post(f"/messages/{failed.id}/edit/", {"data": '{"order": 99}'})
        page = clients["operator"].get(f"/messages/{failed.id}/")

    assert edit.status_code == 303, edit.content[:300]
    assert "99" in page.content.decode()
    assert "99" in Message.objects.get(id=failed.id).data
    assert on_read.captured_queries == [], "the edit or the page after it read the read database"


def test_the_stats_api_reads_the_read_database(read_database: None, shop: Biz, failed: Message) -> None:
    api = make_api(["admin"])
    with queries("read") as on_read:
        response = api.get("/api/v1/stats")

    assert response.status_code == 200
    assert [s for s in response.json()["stats"] if s["topic"] == "orders"]
    assert any("mq_message" in q["sql"] for q in on_read.captured_queries)


def test_without_a_read_database_everything_reads_the_writer(clients: Any, failed: Message) -> None:
    with queries("read") as on_read:
        assert clients["viewer"].get("/messages/").status_code == 200
    assert on_read.captured_queries == []


def test_the_spark_reports_read_the_read_database(read_database: None, monkeypatch: Any, settings: Any) -> None:
    from reports.services import report_source

    settings.MQ_REPORT_JDBC_URL = ""
    name = connections["read"].settings_dict["NAME"]
    monkeypatch.setitem(connections["read"].settings_dict, "HOST", "node2.example")
    monkeypatch.setitem(connections["read"].settings_dict, "PORT", 4307)
    assert report_source().url == f"jdbc:mariadb://node2.example:4307/{name}"

    settings.MQ_READ_DATABASE = "default"
    assert "node2.example" not in report_source().url
