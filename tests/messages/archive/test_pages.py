"""The console's archive: search with the message filters, one archived message with its
trace, redrive; and the message list's move action."""

from __future__ import annotations

from typing import Any

import pytest

from messages.archive.models import MessageArchive
from messages.models import Message, Status
from tests.support.archive import archive_messages
from tests.support.console import add_message
from topics.models import Topic

pytestmark = pytest.mark.django_db


@pytest.fixture
def archived(orders: Topic, foreign_topic: Topic) -> dict[str, int]:
    """orders: an archived FAIL (key order-1), an archived SUCCESS (order-2) and one live
    message; payroll (another business line): an archived message."""
    fail = add_message(
        "orders", Status.FAIL, key="order-1", data='{"sku":"<b>X</b>"}', log="ValueError: bad sku"
    )
    done = add_message("orders", Status.SUCCESS, key="order-2", data='{"sku":"Y"}')
    secret = add_message("payroll", Status.SUCCESS, key="salary-7", data='{"pay":"PAYROLLSECRET"}')
    archive_messages([fail.id, done.id, secret.id])
    live = add_message("orders", Status.NEW, key="order-3")
    return {"fail": fail.id, "done": done.id, "secret": secret.id, "live": live.id}


def test_it_lists_archived_messages_with_the_message_filters(
    clients: dict[str, Any], archived: dict[str, int]
) -> None:
    page = clients["viewer"].get("/archive/").content.decode()
    assert f"/archive/{archived['fail']}/" in page and f"/archive/{archived['done']}/" in page
    assert f"/archive/{archived['live']}/" not in page and "PAYROLLSECRET" not in page
    assert "&lt;b&gt;X&lt;/b&gt;" in page and "<b>X</b>" not in page  # message data is escaped
    assert (
        'name="finished_after"' in page and 'name="added_after"' in page
    )  # the shared filter form
    assert 'href="/archive/"' in page  # linked from the navigation
    filtered = (
        clients["viewer"].get("/archive/", {"status": "FAIL", "key": "order-1"}).content.decode()
    )
    assert (
        f"/archive/{archived['fail']}/" in filtered
        and f"/archive/{archived['done']}/" not in filtered
    )
    bad = clients["viewer"].get("/archive/", {"finished_before": "tomorrow"})
    assert (
        bad.status_code == 200 and "finished_before is not a date and time" in bad.content.decode()
    )


def test_it_shows_redrive_controls_only_to_operators(
    clients: dict[str, Any], archived: dict[str, int]
) -> None:
    assert 'id="redrive-selected"' not in clients["viewer"].get("/archive/").content.decode()
    assert 'id="redrive-selected"' in clients["operator"].get("/archive/").content.decode()
    viewer_detail = clients["viewer"].get(f"/archive/{archived['fail']}/").content.decode()
    assert 'id="archive-redrive-btn"' not in viewer_detail
    assert (
        'id="archive-redrive-btn"'
        in clients["operator"].get(f"/archive/{archived['fail']}/").content.decode()
    )


def test_it_shows_an_archived_message_with_its_trace(
    clients: dict[str, Any], archived: dict[str, int]
) -> None:
    response = clients["viewer"].get(f"/archive/{archived['fail']}/")

    assert response.status_code == 200
    page = response.content.decode()
    assert "Archived message" in page and "order-1" in page and "ValueError: bad sku" in page
    assert "Produced" in page and "Archived" in page and "archived: finished more than" in page


def test_it_denies_an_archived_message_of_another_business_line(
    clients: dict[str, Any], archived: dict[str, int]
) -> None:
    assert clients["operator"].get(f"/archive/{archived['secret']}/").status_code in (403, 404)
    assert clients["outsider"].get(f"/archive/{archived['fail']}/").status_code in (403, 404)
    assert "order-1" not in clients["outsider"].get("/archive/").content.decode()
    response = clients["outsider"].post("/archive/redrive/", {"ids": [archived["fail"]]})
    assert response.status_code in (303, 403, 404)
    assert not Message.objects.filter(headers__has_key="mq-replay-of").exists()


def test_it_redrives_an_archived_message_as_a_new_one(
    clients: dict[str, Any], archived: dict[str, int]
) -> None:
    response = clients["operator"].post("/archive/redrive/", {"ids": [archived["fail"]]})

    assert response.status_code == 303
    copy = Message.objects.get(headers__has_key="mq-replay-of")
    assert response["Location"] == f"/messages/{copy.id}/"
    assert (
        copy.status == Status.NEW
        and copy.headers["mq-replay-of"] == str(archived["fail"])
        and copy.key == "order-1"
    )
    assert MessageArchive.objects.filter(id=archived["fail"]).exists()
    page = clients["operator"].get(response["Location"]).content.decode()
    assert "Redrove 1 archived message" in page


def test_it_redrives_everything_matching_the_filter(
    clients: dict[str, Any], archived: dict[str, int]
) -> None:
    response = clients["operator"].post("/archive/redrive/", {"scope": "filter", "topic": "orders"})

    assert response.status_code == 303 and response["Location"].startswith("/archive/?topic=orders")
    copies = Message.objects.filter(headers__has_key="mq-replay-of")
    assert sorted(int(c.headers["mq-replay-of"]) for c in copies) == [
        archived["fail"],
        archived["done"],
    ]


def test_it_refuses_a_redrive_with_nothing_selected(
    clients: dict[str, Any], archived: dict[str, int]
) -> None:
    response = clients["operator"].post("/archive/redrive/", {})
    assert response.status_code == 400
    assert not Message.objects.filter(headers__has_key="mq-replay-of").exists()


def test_it_moves_selected_messages_from_the_message_list(
    clients: dict[str, Any], orders: Topic
) -> None:
    Topic.objects.create(name="orders.parking", biz=orders.biz)
    waiting = add_message("orders", Status.NEW, key="w")
    running = add_message("orders", Status.RUNNING, key="r")
    page = clients["operator"].get("/messages/").content.decode()
    assert 'value="move"' in page and 'name="to_topic"' in page

    response = clients["operator"].post(
        "/messages/bulk/",
        {
            "action": "move",
            "scope": "selected",
            "ids": [waiting.id, running.id],
            "to_topic": "orders.parking",
            "to_group": "parked",
        },
    )

    assert response.status_code == 303
    moved = Message.objects.get(topic="orders.parking")
    assert moved.group_name == "parked" and moved.headers == {"mq-moved-from": str(waiting.id)}
    assert Message.objects.get(id=running.id).status == Status.RUNNING
    flashed = clients["operator"].get(response["Location"]).content.decode()
    assert (
        "Moved 1 message to orders.parking/parked" in flashed
        and f"{running.id} (running)" in flashed
    )


def test_it_refuses_a_move_without_a_target(clients: dict[str, Any], orders: Topic) -> None:
    waiting = add_message("orders", Status.NEW)
    response = clients["operator"].post(
        "/messages/bulk/",
        {
            "action": "move",
            "scope": "selected",
            "ids": [waiting.id],
            "to_topic": "",
            "to_group": "g",
        },
    )
    assert response.status_code == 400
    assert Message.objects.get(id=waiting.id).status == Status.NEW
