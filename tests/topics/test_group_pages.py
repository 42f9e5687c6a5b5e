"""A topic's groups in the console: their state on the topic and group pages, the actions
(create, pause, resume, limits, filter, replay, delete with confirmation) for the roles that may and
not for the others, inline errors that change nothing, the zero-retry warning and the flag on
groups nobody consumes."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from messages.delivery.produce import ProduceItem, messages_produce
from messages.models import Message, Status
from messages.operations.models import BulkJob
from mqcenter.core.auth import Principal
from mqcenter.models import AuditEntry
from registry.models import ConsumerInstance
from tests.support.console import add_message, client_for, make_user
from topics.models import Biz, Topic, TopicGroup

BROKER = Principal(name="test", scopes=("admin",), biz_ids=None)
LIMITS_URL = "/topics/orders/groups/billing/limits/"


@pytest.fixture
def cast(clients: dict[str, Client], shop: Biz, other: Biz) -> dict[str, Client]:
    """The console cast plus an admin of shop only and an admin of another business line."""
    return {
        **clients,
        "shop_admin": client_for(make_user("sam", "admin", shop)),
        "other_admin": client_for(make_user("oscar", "admin", other)),
    }


def billing() -> TopicGroup:
    return TopicGroup.objects.get(topic__name="orders", name="billing")


def publish(count: int = 1) -> None:
    messages_produce(
        principal=BROKER,
        items=[ProduceItem(topic="orders", data=f'{{"n":{n}}}') for n in range(count)],
    )


def row_of(page: str, group: str) -> str:
    """The group's row in the groups table (the live counts table above names groups too)."""
    table = page[page.index('id="group-table"') :]
    row = table[table.index(f'data-group="{group}"') :]
    return row[: row.index("</tr>")]


def settings_of(group: TopicGroup) -> tuple[Any, ...]:
    group.refresh_from_db()
    return (
        group.mode,
        group.paused,
        group.max_in_flight,
        group.rate_per_second,
        group.key_concurrency,
    )


# --- what the pages show -----------------------------------------------------------------


def test_it_lists_each_group_with_its_state_and_limits(
    cast: dict[str, Client], orders: Topic
) -> None:
    TopicGroup.objects.filter(pk=billing().pk).update(
        paused=True,
        max_in_flight=5,
        rate_per_second=2.5,
        key_concurrency=3,
        last_pull_at=timezone.now() - timedelta(minutes=3),
    )
    TopicGroup.objects.create(topic=orders, name="audit", mode="serial")
    for status in (Status.NEW, Status.NEW, Status.RUNNING, Status.FAIL, Status.TIMEOUT):
        add_message("orders", status)
    now = timezone.now()
    ConsumerInstance.objects.create(
        consumer="host-a:1:c",
        topic="orders",
        group_name="billing",
        started_at=now,
        last_heartbeat=now,
    )
    page = cast["viewer"].get("/topics/orders/").content.decode()
    cells = [
        c.split(">", 1)[1].split("</td>")[0].strip()
        for c in row_of(page, "billing").split("<td")[1:]
    ]
    assert cells[1] == "queue" and "paused" in cells[2]
    assert cells[3:6] == ["5", "2.5", "3"]
    assert cells[6] == "1"  # consumers online
    assert cells[7].startswith(str(now.year))
    # Waiting, in flight and dead are counted once, in the live table, each linking to its list.
    live = page[page.index('id="live-counts"'):]
    live = live[live.index('data-group="billing"'):]
    live = live[: live.index("</tr>")]
    assert re.search(r'live-new"><a href="[^"]*status=NEW">2</a>', live), live
    assert 'live-running">1<' in live
    assert re.search(r'live-dead"><a href="[^"]*status=FAIL,TIMEOUT,EXPIRED">2</a>', live), live
    audit = row_of(page, "audit")
    assert "serial" in audit and "active" in audit and "never" in audit
    assert (
        "Pause</button>" not in page and "group-create-form" not in page
    )  # a viewer sees, cannot act


def test_it_shows_the_controls_to_admins_of_the_topics_business_line_only(
    cast: dict[str, Client], orders: Topic
) -> None:
    for role in ("admin", "shop_admin"):
        page = cast[role].get("/topics/orders/").content.decode()
        assert "Pause</button>" in page and "group-create-form" in page and LIMITS_URL in page, role
    for role in ("viewer", "operator"):
        page = cast[role].get("/topics/orders/").content.decode()
        assert "Pause</button>" not in page and LIMITS_URL not in page, role
    assert cast["other_admin"].get("/topics/orders/").status_code == 404


def test_it_shows_the_group_page_with_the_groups_state_and_controls(
    cast: dict[str, Client], orders: Topic
) -> None:
    page = cast["admin"].get("/topics/orders/groups/billing/").content.decode()
    assert 'id="group-table"' in page and LIMITS_URL in page
    assert 'name="next" value="/topics/orders/groups/billing/"' in page  # pause comes back here
    assert LIMITS_URL not in cast["viewer"].get("/topics/orders/groups/billing/").content.decode()


def test_it_warns_about_a_topic_without_retries(
    cast: dict[str, Client], orders: Topic, shop: Biz
) -> None:
    Topic.objects.create(name="fragile", biz=shop, retry_count=0)
    warning = "a consumer that dies turns its message into a TIMEOUT dead letter"
    assert warning in cast["viewer"].get("/topics/fragile/").content.decode()
    assert warning not in cast["viewer"].get("/topics/orders/").content.decode()
    listing = cast["viewer"].get("/topics/").content.decode()
    fragile = listing[listing.index("/topics/fragile/") :]
    assert "0 retries" in fragile[: fragile.index("</td>")]
    orders_cell = listing[listing.index("/topics/orders/") :]
    assert "0 retries" not in orders_cell[: orders_cell.index("</td>")]


def test_it_offers_the_default_retries_for_a_new_topic(
    cast: dict[str, Client], settings: Any
) -> None:
    settings.MQ_DEFAULT_RETRY_COUNT = 3
    assert (
        'name="retry_count" type="number" min="0" max="1000" value="3"'
        in cast["admin"].get("/topics/+new/").content.decode()
    )


# --- groups nobody consumes --------------------------------------------------------------


def _abandon(
    group: TopicGroup, *, last_pull: timedelta | None, created: timedelta = timedelta(days=3)
) -> None:
    now = timezone.now()
    TopicGroup.objects.filter(pk=group.pk).update(
        created_at=now - created, last_pull_at=None if last_pull is None else now - last_pull
    )


@pytest.mark.parametrize(
    ("last_pull", "created", "online", "arrived", "flagged"),
    [
        (timedelta(days=2), timedelta(days=3), False, timedelta(hours=1), True),
        (None, timedelta(days=3), False, timedelta(hours=1), True),  # never pulled since it was created
        # 3,000 waiting an hour in a group made an hour ago: flagged long before a day.
        (None, timedelta(hours=1), False, timedelta(minutes=11), True),
        (None, timedelta(minutes=5), False, timedelta(minutes=4), False),  # too young to tell
        (timedelta(minutes=2), timedelta(days=3), False, timedelta(hours=1), False),  # pulled lately
        (timedelta(days=2), timedelta(days=3), True, timedelta(hours=1), False),  # a consumer is online
        (timedelta(days=2), timedelta(days=3), False, timedelta(days=2), True),  # waiting for days
        (timedelta(days=2), timedelta(days=3), False, timedelta(minutes=2), False),  # waiting briefly
        (timedelta(days=2), timedelta(days=3), False, None, False),  # nothing waiting
    ],
    ids=["idle", "never-pulled", "within-the-hour", "young", "pulled", "online", "waiting-long", "waiting-briefly",
         "empty"],
)
def test_it_flags_a_group_nobody_consumes_once_a_message_waits_past_the_age_alarm(
    cast: dict[str, Client],
    orders: Topic,
    last_pull: timedelta | None,
    created: timedelta,
    online: bool,
    arrived: timedelta | None,
    flagged: bool,
) -> None:
    _abandon(billing(), last_pull=last_pull, created=created)
    if arrived is not None:
        Message.objects.filter(pk=add_message("orders").pk).update(
            effect_time=timezone.now() - arrived
        )
    if online:
        now = timezone.now()
        ConsumerInstance.objects.create(
            consumer="c1", topic="orders", group_name="billing", started_at=now, last_heartbeat=now
        )
    for url in ("/topics/orders/", "/topics/orders/groups/billing/"):
        page = cast["viewer"].get(url).content.decode()
        assert ("has no consumer while its messages wait" in page) is flagged, url
        assert ('title="no consumer seen while messages wait"' in page) is flagged, url
    dashboard = cast["viewer"].get("/").content.decode()
    assert f'id="unattended-count">{int(flagged)}<' in dashboard
    assert ("/topics/orders/groups/billing/" in dashboard) is flagged
    assert (
        'id="unattended-count">0<' in cast["outsider"].get("/").content.decode()
    )  # another line's group


# --- actions: who may ------------------------------------------------------------------

ALLOWED = ("admin", "shop_admin")
REFUSED = {"viewer": 403, "operator": 403, "outsider": 403, "other_admin": 404}

ACTIONS: list[tuple[str, str, dict[str, Any], Any]] = [
    # name, url, form, did it happen?
    (
        "create",
        "/topics/orders/groups/+new/",
        {"group": "audit", "mode": "serial", "start": "latest"},
        lambda: TopicGroup.objects.filter(
            topic__name="orders", name="audit", mode="serial"
        ).exists(),
    ),
    ("pause", "/topics/orders/groups/billing/pause/", {"paused": "1"}, lambda: billing().paused),
    (
        "limits",
        LIMITS_URL,
        {
            "mode": "sharded",
            "max_in_flight": "4",
            "rate_per_second": "12.5",
            "key_concurrency": "2",
        },
        lambda: settings_of(billing()) == ("sharded", False, 4, 12.5, 2),
    ),
    (
        "filter",
        "/topics/orders/groups/billing/filter/",
        {"kind": "expression", "tags": "", "expression": "region = 'eu'"},
        lambda: billing().filter_spec == {"expression": "region = 'eu'"},
    ),
    (
        "replay",
        "/topics/orders/groups/billing/replay/",
        {"since": "2000-01-01T00:00:00"},
        lambda: (
            Message.objects.filter(
                topic="orders", group_name="billing", headers__has_key="mq-replay-of"
            ).count()
            == 2
        ),
    ),
    (
        "delete",
        "/topics/orders/groups/billing/delete/",
        {"confirm": "1"},
        lambda: not TopicGroup.objects.filter(topic__name="orders", name="billing").exists(),
    ),
]


@pytest.mark.parametrize("role", [*ALLOWED, *REFUSED, "anonymous"])
@pytest.mark.parametrize(("name", "url", "form", "happened"), ACTIONS, ids=[a[0] for a in ACTIONS])
def test_it_lets_only_an_admin_of_the_topics_line_act_on_its_groups(
    cast: dict[str, Client],
    orders: Topic,
    role: str,
    name: str,
    url: str,
    form: dict[str, Any],
    happened: Any,
) -> None:
    publish(2)  # billing's history, for the replay
    Message.objects.filter(topic="orders", group_name="billing").update(status=Status.SUCCESS)
    audit_before = AuditEntry.objects.count()
    response = cast[role].post(url, form)
    if role in ALLOWED:
        assert response.status_code == 303, (response.status_code, response.content[:400])
        assert response["Location"].startswith("/topics/orders/")
        assert happened(), f"{name} by {role} did not happen"
        assert AuditEntry.objects.count() > audit_before, "the action was not audited"
    else:
        expected = 302 if role == "anonymous" else REFUSED[role]
        assert response.status_code == expected, (response.status_code, response.content[:400])
        assert not happened(), f"{name} by {role} happened although refused"
        assert AuditEntry.objects.count() == audit_before


def test_it_resumes_a_paused_group_and_goes_back_to_the_page_it_came_from(
    cast: dict[str, Client], orders: Topic
) -> None:
    TopicGroup.objects.filter(pk=billing().pk).update(paused=True)
    response = cast["admin"].post(
        "/topics/orders/groups/billing/pause/",
        {"paused": "0", "next": "/topics/orders/groups/billing/"},
    )
    assert response.status_code == 303 and response["Location"] == "/topics/orders/groups/billing/"
    assert billing().paused is False


@pytest.mark.parametrize(
    "target",
    ["https://evil.example/", "//evil.example/x", "/ok\r\nSet-Cookie: x=1", "javascript:alert(1)"],
)
def test_it_redirects_only_to_paths_of_this_site(
    cast: dict[str, Client], orders: Topic, target: str
) -> None:
    response = cast["admin"].post(
        "/topics/orders/groups/billing/pause/", {"paused": "1", "next": target}
    )
    assert response.status_code == 303 and response["Location"] == "/topics/orders/"
    limits = cast["admin"].post(
        LIMITS_URL, {"mode": "queue", "max_in_flight": "3", "key_concurrency": "1", "next": target}
    )
    assert limits["Location"] == "/topics/orders/"


def test_it_asks_before_deleting_a_group_and_removes_its_waiting_messages(
    cast: dict[str, Client], orders: Topic
) -> None:
    publish(3)
    admin = cast["admin"]
    ask = admin.get("/topics/orders/groups/billing/delete/")
    assert ask.status_code == 200
    assert (
        "Delete group billing of orders?" in ask.content.decode()
        and "3 waiting messages are removed" in ask.content.decode()
    )
    assert (
        admin.post("/topics/orders/groups/billing/delete/", {}).status_code == 200
    )  # no confirm: asks again
    assert (
        TopicGroup.objects.filter(name="billing").exists()
        and Message.objects.filter(group_name="billing").count() == 3
    )
    done = admin.post(
        "/topics/orders/groups/billing/delete/",
        {"confirm": "1", "next": "/topics/orders/groups/billing/"},
    )
    assert (
        done.status_code == 303 and done["Location"] == "/topics/orders/"
    )  # not the page of the deleted group
    assert not TopicGroup.objects.filter(name="billing").exists()
    assert not Message.objects.filter(group_name="billing", status=Status.NEW).exists()
    assert "3 waiting messages removed" in admin.get("/topics/orders/").content.decode()


def test_it_creates_a_group_from_earliest_with_the_topics_history(
    cast: dict[str, Client], orders: Topic
) -> None:
    publish(2)
    response = cast["admin"].post(
        "/topics/orders/groups/+new/", {"group": "late", "mode": "queue", "start": "earliest"}
    )
    assert response.status_code == 303
    assert Message.objects.filter(topic="orders", group_name="late").count() == 2


def test_it_opens_the_job_page_when_a_replay_is_large(
    cast: dict[str, Client], orders: Topic, settings: Any
) -> None:
    settings.MQ_REDRIVE_SYNC_LIMIT = 2
    publish(3)
    response = cast["shop_admin"].post(
        "/topics/orders/groups/+new/", {"group": "late", "mode": "queue", "start": "earliest"}
    )
    job = BulkJob.objects.get(kind=BulkJob.Kind.REPLAY)
    assert response.status_code == 303 and response["Location"] == f"/jobs/{job.id}/"
    assert job.filter["group"] == "late" and job.biz_ids == [orders.biz_id]
    assert "its replay runs as job" in cast["shop_admin"].get(response["Location"]).content.decode()
    assert not Message.objects.filter(group_name="late").exists()  # the job copies, not the request


def test_it_swaps_in_the_form_for_htmx_and_answers_an_action_with_a_redirect(
    cast: dict[str, Client], orders: Topic
) -> None:
    form = cast["admin"].get(
        f"{LIMITS_URL}?next=/topics/orders/", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="group-panel"
    )
    body = form.content.decode()
    assert form.status_code == 200 and "<html" not in body and body.strip().startswith("<form")
    assert 'name="next" value="/topics/orders/"' in body
    TopicGroup.objects.filter(pk=billing().pk).update(rate_per_second=12.0)
    plain = cast["admin"].get(LIMITS_URL).content.decode()  # without JavaScript: a page of its own
    assert "<html" in plain and 'id="group-limits-form"' in plain and 'value="12"' in plain
    done = cast["admin"].post(
        LIMITS_URL,
        {"mode": "queue", "max_in_flight": "9", "key_concurrency": "1"},
        HTTP_HX_REQUEST="true",
    )
    assert done.status_code == 204 and done["HX-Redirect"] == "/topics/orders/"
    assert billing().max_in_flight == 9
    refused = cast["viewer"].post(LIMITS_URL, {"max_in_flight": "1"}, HTTP_HX_REQUEST="true")
    assert refused.status_code == 403 and refused["HX-Retarget"] == "#flash"


# --- bad input: an inline error, the input kept, nothing changed ---------------------------

FUTURE = (timezone.now() + timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%S")
VALID_LIMITS = {"mode": "queue", "max_in_flight": "", "rate_per_second": "", "key_concurrency": "1"}

BAD_INPUTS: list[tuple[str, dict[str, str], str, str]] = [
    # url, form, the field marked invalid, the message shown
    (LIMITS_URL, {**VALID_LIMITS, "max_in_flight": "0"}, "max_in_flight", "between 1 and"),
    (LIMITS_URL, {**VALID_LIMITS, "max_in_flight": "lots"}, "max_in_flight", "whole number"),
    (LIMITS_URL, {**VALID_LIMITS, "rate_per_second": "-1"}, "rate_per_second", "from 0.01 to 100,000"),
    (
        LIMITS_URL,
        {**VALID_LIMITS, "rate_per_second": "100001"},
        "rate_per_second",
        "from 0.01 to 100,000",
    ),
    (LIMITS_URL, {**VALID_LIMITS, "rate_per_second": "nan"}, "rate_per_second", "must be a number"),
    (LIMITS_URL, {**VALID_LIMITS, "key_concurrency": "0"}, "key_concurrency", "between 1 and"),
    (LIMITS_URL, {**VALID_LIMITS, "key_concurrency": ""}, "key_concurrency", "at least 1"),
    (LIMITS_URL, {**VALID_LIMITS, "mode": "fanout"}, "mode", "mode must be one of"),
    (LIMITS_URL, {**VALID_LIMITS, "fair_keys": "maybe"}, "fair_keys", "on or off"),
    (
        "/topics/orders/groups/+new/",
        {"group": "bad name!", "mode": "queue", "start": "latest"},
        "group",
        "letters, digits",
    ),
    (
        "/topics/orders/groups/+new/",
        {"group": "billing", "mode": "queue", "start": "latest"},
        "group",
        "already exists",
    ),
    (
        "/topics/orders/groups/+new/",
        {"group": "late", "mode": "fanout", "start": "latest"},
        "mode",
        "mode must be one of",
    ),
    (
        "/topics/orders/groups/+new/",
        {"group": "late", "mode": "queue", "start": "yesterday"},
        "start",
        "must be",
    ),
    (
        "/topics/orders/groups/+new/",
        {"group": "late", "mode": "queue", "start": "time", "start_time": ""},
        "start_time",
        "time to start from",
    ),
    (
        "/topics/orders/groups/+new/",
        {"group": "late", "mode": "queue", "start": "time", "start_time": FUTURE},
        "start_time",
        "must not be in the future",
    ),
    (
        "/topics/orders/groups/+new/",
        {"group": "late", "mode": "queue", "start": "time", "start_time": "2024-13-45T99:00"},
        "start_time",
        "not a date and time",
    ),
    ("/topics/orders/groups/billing/replay/", {"since": ""}, "since", "time to replay from"),
    (
        "/topics/orders/groups/billing/replay/",
        {"since": FUTURE},
        "since",
        "must not be in the future",
    ),
    ("/topics/orders/groups/billing/replay/", {"since": "soon"}, "since", "not a date and time"),
]


@pytest.mark.parametrize("htmx", [False, True], ids=["page", "htmx"])
@pytest.mark.parametrize(
    ("url", "form", "field", "message"),
    BAD_INPUTS,
    ids=[f"{b[0].split('/')[-2]}-{b[2]}-{i}" for i, b in enumerate(BAD_INPUTS)],
)
def test_it_shows_bad_input_inline_and_changes_nothing(
    cast: dict[str, Client],
    orders: Topic,
    htmx: bool,
    url: str,
    form: dict[str, str],
    field: str,
    message: str,
) -> None:
    publish(2)
    before = (
        settings_of(billing()),
        list(TopicGroup.objects.values_list("name", flat=True)),
        Message.objects.count(),
        AuditEntry.objects.count(),
    )
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    response = cast["admin"].post(url, form, **headers)
    body = response.content.decode()
    assert response.status_code in (400, 409), (response.status_code, body[:300])
    assert ("<html" in body) is not htmx
    assert f'name="{field}"' in body
    marked = body[body.index(f'name="{field}"') :]
    assert 'aria-invalid="true"' in marked[: marked.index(">")]
    error = marked[marked.index(">") :]
    assert message in error[: error.index("</div>")]  # the error sits right after its field
    for name, value in form.items():
        if value and name not in ("mode", "start", "fair_keys"):  # selects: their choice is shown
            assert f'value="{value}"' in body, f"{name} was not kept"
    assert before == (
        settings_of(billing()),
        list(TopicGroup.objects.values_list("name", flat=True)),
        Message.objects.count(),
        AuditEntry.objects.count(),
    )


def test_it_answers_an_unknown_group_with_not_found(cast: dict[str, Client], orders: Topic) -> None:
    for url in (
        "/topics/orders/groups/nope/limits/",
        "/topics/orders/groups/nope/replay/",
        "/topics/orders/groups/nope/delete/",
    ):
        assert cast["admin"].get(url).status_code == 404, url
    assert (
        cast["admin"].post("/topics/orders/groups/nope/pause/", {"paused": "1"}).status_code == 404
    )
    assert cast["admin"].post("/topics/nope/groups/+new/", {"group": "a"}).status_code == 404


def test_the_limits_form_turns_fair_keys_on_and_off(cast: dict[str, Client], orders: Topic) -> None:
    form = cast["admin"].get(LIMITS_URL).content.decode()
    assert 'name="fair_keys"' in form and '<option value="off" selected>' in form
    done = cast["admin"].post(LIMITS_URL, {**VALID_LIMITS, "fair_keys": "on"}, HTTP_HX_REQUEST="true")
    assert done.status_code == 204 and billing().fair_keys
    assert '<option value="on" selected>' in cast["admin"].get(LIMITS_URL).content.decode()
    assert "fair keys" in row_of(cast["admin"].get("/topics/orders/").content.decode(), "billing")
    cast["admin"].post(LIMITS_URL, VALID_LIMITS, HTTP_HX_REQUEST="true")  # left out: unchanged
    assert billing().fair_keys
    cast["admin"].post(LIMITS_URL, {**VALID_LIMITS, "fair_keys": "off"}, HTTP_HX_REQUEST="true")
    assert not billing().fair_keys
