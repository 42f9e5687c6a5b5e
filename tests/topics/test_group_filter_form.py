"""A group's subscription filter in the console: an admin of the topic's business line sets
tags, changes them to an expression and clears it through the same service as the API
(audited, applied to later publishes); a bad expression or tag is answered in the form with
the parser's message and what was typed, and changes nothing; the filter text is escaped
wherever it is shown; other roles see it read-only (refusals are in test_group_pages.py)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils.html import escape

from messages.delivery.produce import ProduceItem, messages_produce
from messages.models import Message
from messages.routing.filters import filtered_out
from mqcenter.core.auth import Principal
from mqcenter.models import AuditEntry
from topics.models import Biz, GroupFilterSkips, Topic, TopicGroup

BROKER = Principal(name="test", scopes=("admin",), biz_ids=None)
FILTER_URL = "/topics/orders/groups/billing/filter/"
GROUP_PAGE = "/topics/orders/groups/billing/"
BAD = "tag = 'paid' region = 'eu'"  # AND missing: the parser stops at `region`, position 13


@pytest.fixture
def admin(clients: dict[str, Client]) -> Client:
    return clients["admin"]


def billing() -> TopicGroup:
    return TopicGroup.objects.get(topic__name="orders", name="billing")


def publish(*items: tuple[str | None, dict[str, str]]) -> None:
    messages_produce(
        principal=BROKER,
        items=[ProduceItem(topic="orders", data="{}", tag=tag, headers=headers) for tag, headers in items],
    )


def copies() -> int:
    return Message.objects.filter(topic="orders", group_name="billing").count()


def audits() -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(action="group.update", target_name="orders/billing").order_by("id"))


def post(client: Client, form: dict[str, str], *, htmx: bool = True, **extra: Any) -> Any:
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    return client.post(FILTER_URL, {"next": GROUP_PAGE, **form}, **headers, **extra)


def state() -> tuple[Any, ...]:
    group = billing()
    skips = sorted(GroupFilterSkips.objects.filter(group=group).values_list("slot", "skipped"))
    return group.filter_spec, group.filter_set_at, skips, len(audits())


def test_an_admin_sets_changes_and_clears_the_filter_and_each_applies_to_later_publishes(
    admin: Client, orders: Topic
) -> None:
    publish(("created", {}))  # before any filter: copied
    assert copies() == 1

    done = post(admin, {"kind": "tags", "tags": " paid , created,, paid "})
    assert done.status_code == 204 and done["HX-Redirect"] == GROUP_PAGE
    assert billing().filter_spec == {"tags": ["created", "paid"]} and billing().filter_set_at is not None
    publish(("created", {}), ("shipped", {}), (None, {}))
    assert copies() == 2 and filtered_out(billing().pk) == 2
    page = admin.get(GROUP_PAGE).content.decode()
    assert "Saved the filter of group billing; it applies to messages published from now on." in page
    assert "tags: created, paid" in page and "2 publishes skipped" in page
    assert 'value="created, paid"' in page  # the form shows the filter it would change
    assert "applies to messages published afterwards" in page

    done = post(admin, {"kind": "expression", "tags": "created, paid", "expression": "region = 'eu' AND amount > 100"})
    assert done.status_code == 204
    assert billing().filter_spec == {"expression": "region = 'eu' AND amount > 100"}
    assert filtered_out(billing().pk) == 0  # a new filter counts from zero
    publish(("created", {"region": "eu", "amount": "250"}), ("created", {"region": "us", "amount": "250"}))
    assert copies() == 3 and filtered_out(billing().pk) == 1

    done = post(admin, {"kind": "none", "tags": "", "expression": "region = 'eu' AND amount > 100"})
    assert done.status_code == 204 and billing().filter_spec is None and billing().filter_set_at is None
    publish(("anything", {}))
    assert copies() == 4
    assert "every publish" in admin.get(GROUP_PAGE).content.decode()

    # Audited as the API's changes are: one group.update each, with the filter before and after.
    trail = [(entry.before["filter"], entry.after["filter"]) for entry in audits()]
    assert trail == [
        (None, {"tags": ["created", "paid"]}),
        ({"tags": ["created", "paid"]}, {"expression": "region = 'eu' AND amount > 100"}),
        ({"expression": "region = 'eu' AND amount > 100"}, None),
    ]
    assert {entry.actor for entry in audits()} == {"user:ada"}


def test_the_topic_pages_filter_action_opens_the_form_and_a_plain_post_redirects(
    admin: Client, orders: Topic
) -> None:
    topic_page = admin.get("/topics/orders/").content.decode()
    assert FILTER_URL in topic_page
    form = admin.get(f"{FILTER_URL}?next=/topics/orders/", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="group-panel")
    body = form.content.decode()
    assert form.status_code == 200 and body.strip().startswith("<form") and 'id="group-filter-form"' in body
    assert 'name="next" value="/topics/orders/"' in body
    done = admin.post(FILTER_URL, {"kind": "tags", "tags": "paid", "next": "/topics/orders/"})
    assert done.status_code == 303 and done["Location"] == "/topics/orders/"
    assert billing().filter_spec == {"tags": ["paid"]}


def test_saving_the_same_filter_again_writes_nothing(admin: Client, orders: Topic) -> None:
    post(admin, {"kind": "tags", "tags": "paid, created"})
    publish(("shipped", {}))
    before = state()
    assert post(admin, {"kind": "tags", "tags": "created,paid"}).status_code == 204
    assert state() == before  # no audit row, the skipped count kept


@pytest.mark.parametrize("htmx", [False, True], ids=["page", "htmx"])
def test_a_bad_expression_is_answered_in_the_form_with_its_position_and_changes_nothing(
    admin: Client, orders: Topic, htmx: bool
) -> None:
    post(admin, {"kind": "tags", "tags": "paid"})
    publish(("shipped", {}))
    before = state()
    typed = BAD + " OR note = '<b>x</b>'"
    response = post(admin, {"kind": "expression", "tags": "paid", "expression": typed}, htmx=htmx)
    body = response.content.decode()
    assert response.status_code == 400, body[:300]
    assert ("<html" in body) is not htmx
    field = body[body.index('name="expression"') :]
    assert 'aria-invalid="true"' in field[: field.index(">")]
    assert f">{escape(typed)}</textarea>" in field  # what was typed stays, escaped
    error = field[field.index('id="gf-expr-error"') :]
    error = error[: error.index("</div></div>")]
    assert "The expression does not parse: expected AND, OR or the end, found &#x27;region&#x27; at position 13." in error
    assert "<mark>r</mark>" in error and "&lt;b&gt;x&lt;/b&gt;" in error and "<b>" not in error
    assert 'value="paid"' in body  # the other field keeps what was typed too
    assert state() == before


@pytest.mark.parametrize(
    ("form", "field", "message"),
    [
        ({"kind": "tags", "tags": "paid, bad tag!"}, "tags", "&#x27;bad tag!&#x27;: must be 1-64 characters"),
        ({"kind": "tags", "tags": " , "}, "tags", "Give at least one tag"),
        ({"kind": "expression", "expression": ""}, "expression", "Give an expression"),
        ({"kind": "expression", "expression": "amount >"}, "expression", "at position 8"),
        ({"kind": "expression", "expression": "amount = 1 ; DROP"}, "expression", "unexpected character &#x27;;&#x27; at position 11"),
        ({"kind": "sql"}, "kind", "Choose no filter, tags or an expression."),
    ],
)
def test_other_bad_input_is_shown_beside_its_field_and_changes_nothing(
    admin: Client, orders: Topic, form: dict[str, str], field: str, message: str
) -> None:
    before = state()
    response = post(admin, {"tags": "", "expression": "", **form})
    body = response.content.decode()
    assert response.status_code == 400, body[:300]
    marked = body[body.index(f'name="{field}"') :]
    assert 'aria-invalid="true"' in marked[: marked.index(">")]
    assert message in marked[: marked.index('<div class="help', marked.index(">")) + 400]
    assert state() == before


def test_the_filter_text_is_escaped_on_the_topic_and_group_pages(
    clients: dict[str, Client], orders: Topic
) -> None:
    expression = "note = '<script>alert(1)</script>' OR \"x&y\" IS NOT NULL"
    assert post(clients["admin"], {"kind": "expression", "expression": expression}).status_code == 204
    for role in ("admin", "viewer"):
        for url in ("/topics/orders/", GROUP_PAGE):
            page = clients[role].get(url).content.decode()
            assert "<script>alert(1)" not in page, (role, url)
            assert escape(expression) in page, (role, url)


def test_other_roles_see_the_filter_read_only_on_the_group_page(
    clients: dict[str, Client], orders: Topic, shop: Biz
) -> None:
    post(clients["admin"], {"kind": "tags", "tags": "paid, created"})
    for role in ("viewer", "operator"):
        page = clients[role].get(GROUP_PAGE).content.decode()
        section = page[page.index('id="group-filter"') :]
        section = section[: section.index("</section>")]
        assert "Messages with one of these tags: <code>created, paid</code>" in section, role
        assert "applies to messages published afterwards" in section
        assert "<form" not in section and FILTER_URL not in page, role
    admin_page = clients["admin"].get(GROUP_PAGE).content.decode()
    assert 'id="group-filter-form"' in admin_page


def test_the_forms_help_and_errors_are_in_chinese_for_a_chinese_browser(admin: Client, orders: Topic) -> None:
    page = admin.get(GROUP_PAGE, HTTP_ACCEPT_LANGUAGE="zh-Hans").content.decode()
    section = page[page.index('id="group-filter"') :]
    assert "A filter change applies" not in section and "Save filter" not in section
    assert "筛选条件的更改只对之后发布的消息生效" in section
    response = post(admin, {"kind": "expression", "expression": BAD}, HTTP_ACCEPT_LANGUAGE="zh-Hans")
    body = response.content.decode()
    assert response.status_code == 400
    assert "The expression does not parse" not in body and "表达式无法解析" in body
    assert "at position 13" in body  # the parser's own words, as the services' messages stay
