"""Subscription filters on the real database: a publish is copied only to the groups whose
filter matches, each skip is counted, a filter change applies to later publishes, replays
follow the filter, and a bad filter answers 400 naming the position."""

from __future__ import annotations

import pytest

from messages.models import Message
from mqcenter.models import AuditEntry
from tests.support.api import expect_error, produce, pull
from topics.models import Topic, TopicGroup

pytestmark = pytest.mark.django_db


@pytest.fixture
def orders(shop, admin_api) -> Topic:
    topic = Topic.objects.create(name="orders", biz=shop)
    for body in ({"group": "all"}, {"group": "paid", "filter": {"tags": ["paid", "refunded"]}},
                 {"group": "eu-big", "filter": {"expression": "tag IN ('created','paid') AND region = 'eu' AND amount > 100"}}):
        response = admin_api.post("/api/v1/topics/orders/groups", body)
        assert response.status_code == 201, response.content
    return topic


def groups_of(data: int) -> list[str]:
    return sorted(Message.objects.filter(topic="orders", data=str(data)).values_list("group_name", flat=True))


def test_a_publish_is_copied_only_to_the_groups_whose_filter_matches(producer_api, consumer_api, orders):
    entries = produce(
        producer_api,
        {"topic": "orders", "data": 1, "tag": "paid", "headers": {"region": "eu", "amount": "150"}},
        {"topic": "orders", "data": 2, "tag": "created", "headers": {"region": "us", "amount": "150"}},
        {"topic": "orders", "data": 3, "tag": "refunded"},
        {"topic": "orders", "data": 4},
        {"topic": "orders", "data": 5, "group": "paid"},  # point-to-point ignores filters
    )
    assert groups_of(1) == ["all", "eu-big", "paid"]
    assert groups_of(2) == ["all"]
    assert groups_of(3) == ["all", "paid"]
    assert groups_of(4) == ["all"]
    assert groups_of(5) == ["paid"]
    # Each entry names its item: the copy counts differ item by item.
    assert [(e["item"], e["group"]) for e in entries] == [
        (0, "all"), (0, "eu-big"), (0, "paid"), (1, "all"), (2, "all"), (2, "paid"), (3, "all"), (4, "paid")]
    status = producer_api.get("/api/v1/topics/orders/groups/eu-big").json()
    assert status["filtered_out"] == 3 and status["filter"]["expression"].startswith("tag IN")
    assert producer_api.get("/api/v1/topics/orders/groups/paid").json()["filtered_out"] == 2
    assert producer_api.get("/api/v1/topics/orders/groups/all").json()["filter"] is None
    [delivered] = pull(consumer_api, "orders", group="eu-big")
    assert delivered["tag"] == "paid" and delivered["data"] == 1


def test_a_publish_no_group_wants_is_stored_nowhere_and_answers_no_entry(producer_api, admin_api, orders):
    assert admin_api.delete("/api/v1/topics/orders/groups/all").status_code == 204
    entries = produce(producer_api, {"topic": "orders", "data": 1, "tag": "other"},
                      {"topic": "orders", "data": 2, "tag": "paid"})
    assert [(e["item"], e["group"]) for e in entries] == [(1, "paid")]
    assert Message.objects.filter(topic="orders").count() == 1


def test_a_filter_change_applies_to_later_publishes_and_restarts_the_count(producer_api, admin_api, orders):
    produce(producer_api, {"topic": "orders", "data": 1, "tag": "created"})
    response = admin_api.patch("/api/v1/topics/orders/groups/paid", {"filter": {"tags": ["created"]}})
    assert response.status_code == 200 and response.json()["filtered_out"] == 0
    produce(producer_api, {"topic": "orders", "data": 2, "tag": "created"}, {"topic": "orders", "data": 3, "tag": "paid"})
    assert groups_of(1) == ["all"] and groups_of(2) == ["all", "paid"] and groups_of(3) == ["all"]
    assert admin_api.get("/api/v1/topics/orders/groups/paid").json()["filtered_out"] == 1
    audit = AuditEntry.objects.filter(action="group.update").latest("id")
    assert audit.before["filter"] == {"tags": ["paid", "refunded"]} and audit.after["filter"] == {"tags": ["created"]}
    response = admin_api.patch("/api/v1/topics/orders/groups/paid", {"filter": None})
    assert response.json()["filter"] is None
    produce(producer_api, {"topic": "orders", "data": 4, "tag": "x"})
    assert groups_of(4) == ["all", "paid"]
    entries = produce(producer_api, {"topic": "orders", "data": 5})
    assert all("item" in e for e in entries)  # eu-big still filters


def test_setting_the_filter_a_group_has_changes_nothing(producer_api, admin_api, orders):
    produce(producer_api, {"topic": "orders", "data": 1, "tag": "created"})
    audits = AuditEntry.objects.filter(action="group.update").count()
    response = admin_api.patch("/api/v1/topics/orders/groups/paid", {"filter": {"tags": ["refunded", "paid"]}})
    assert response.status_code == 200 and response.json()["filtered_out"] == 1
    assert AuditEntry.objects.filter(action="group.update").count() == audits
    # With another change beside it, that change is made and the filter's count runs on.
    response = admin_api.patch("/api/v1/topics/orders/groups/paid",
                               {"filter": {"tags": ["paid", "refunded"]}, "max_in_flight": 5})
    assert response.status_code == 200 and response.json()["filtered_out"] == 1
    assert response.json()["max_in_flight"] == 5
    assert "filter" not in AuditEntry.objects.filter(action="group.update").latest("id").after


def test_without_filters_the_answer_is_as_before(producer_api, shop):
    Topic.objects.create(name="orders.plain", biz=shop)
    [entry] = produce(producer_api, {"topic": "orders.plain", "data": 1, "tag": "t"})
    assert set(entry) == {"id", "topic", "group", "status", "duplicate"}
    assert Message.objects.get(id=entry["id"]).tag == "t"


def test_a_group_created_from_earliest_replays_only_what_its_filter_matches(producer_api, admin_api, orders):
    produce(producer_api, {"topic": "orders", "data": 1, "tag": "paid"}, {"topic": "orders", "data": 2, "tag": "created"})
    response = admin_api.post("/api/v1/topics/orders/groups",
                              {"group": "late", "start": "earliest", "filter": {"expression": "tag = 'paid'"}})
    assert response.status_code == 201, response.content
    assert list(Message.objects.filter(group_name="late").values_list("data", "tag")) == [("1", "paid")]


@pytest.mark.parametrize(("body", "field", "position"), [
    ({"filter": {"expression": "tag IN ('a' OR"}}, "filter.expression", 12),
    ({"filter": {"expression": "amount >"}}, "filter.expression", 8),
    ({"filter": {"tags": []}}, "filter.tags", None),
    ({"filter": {"tags": ["bad tag"]}}, "filter.tags[0]", None),
    ({"filter": {"tags": ["a"], "expression": "tag = 'a'"}}, "filter", None),
    ({"filter": "tag = 'a'"}, "filter", None),
])
def test_a_bad_filter_answers_400_naming_the_field_and_position(admin_api, orders, body, field, position):
    for response in (admin_api.post("/api/v1/topics/orders/groups", {"group": "new", **body}),
                     admin_api.patch("/api/v1/topics/orders/groups/paid", body)):
        error = expect_error(response, 400, "invalid_request", field)
        assert error["details"].get("position") == position
    assert not TopicGroup.objects.filter(name="new").exists()
    assert TopicGroup.objects.get(name="paid").filter_spec == {"tags": ["paid", "refunded"]}


def test_a_bad_tag_answers_400(producer_api, orders):
    expect_error(producer_api.post("/api/v1/messages", {"messages": [{"topic": "orders", "data": 1, "tag": "a b"}]}),
                 400, "invalid_request", "messages[0].tag")
    assert not Message.objects.exists()


def test_search_filters_by_tag(producer_api, admin_api, orders):
    produce(producer_api, {"topic": "orders", "data": 1, "tag": "paid"}, {"topic": "orders", "data": 2, "tag": "x"})
    found = admin_api.get("/api/v1/messages", {"topic": "orders", "tag": "paid"}).json()["messages"]
    assert {m["data"] for m in found} == {1} and {m["tag"] for m in found} == {"paid"}


def test_the_console_shows_each_groups_filter_and_its_skips(producer_api, clients, orders):
    produce(producer_api, {"topic": "orders", "data": 1, "tag": "created"}, {"topic": "orders", "data": 2, "tag": "x"})
    page = clients["viewer"].get("/topics/orders/").content.decode()
    table = page[page.index('id="group-table"'):]

    def row(group: str) -> str:
        part = table[table.index(f'data-group="{group}"'):]
        return part[: part.index("</tr>")]

    assert "tags: paid, refunded" in row("paid") and "2 publishes skipped" in row("paid")
    assert "tag IN (&#x27;created&#x27;,&#x27;paid&#x27;)" in row("eu-big") and "2 publishes skipped" in row("eu-big")
    assert "every publish" in row("all")
    zh = clients["viewer"].get("/topics/orders/", HTTP_ACCEPT_LANGUAGE="zh-CN").content.decode()
    assert "已过滤 2 条发布" in zh and "标签: paid, refunded" in zh
