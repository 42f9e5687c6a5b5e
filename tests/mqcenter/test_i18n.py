"""The console in Simplified Chinese: chosen from Accept-Language or the header's switch,
English by default, the API always English; and the committed catalog complete and compiled."""

from __future__ import annotations

import ast
import gettext
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.test import Client
from django.utils import translation
from django.utils.translation.template import templatize

from messages import consumers
from messages.models import Message, MessageTrace, Status, TraceEvent
from messages.views import TRACE_EVENT_NAMES
from tests.messages.test_live import WebsocketCommunicator, _app
from tests.support.console import add_message, make_user
from topics.models import Biz, Topic, TopicGroup

ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-CN,zh;q=0.9,en;q=0.5"}
ROOT = Path(settings.BASE_DIR)
PO = ROOT / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po"
MO = PO.with_suffix(".mo")
APPS = ("mqcenter", "messages", "topics", "registry", "reports")


@pytest.fixture(autouse=True)
def _english_after() -> Iterator[None]:
    """LocaleMiddleware leaves a request's language active in the thread: reset it, so the
    tests that run next in this process see the default language."""
    yield
    translation.activate(settings.LANGUAGE_CODE)


def test_it_shows_the_topic_page_in_chinese_to_a_chinese_browser(
    clients: dict[str, Client], orders: Topic
) -> None:
    body = clients["admin"].get("/topics/orders/", **ZH).content.decode()
    assert '<html lang="zh-hans">' in body
    assert "主题 orders" in body and "消费组" in body and "积压" in body
    assert "Backlog" not in body and "Consumer groups" not in body


def test_it_shows_the_dashboard_and_navigation_in_chinese(
    clients: dict[str, Client], failed: Message
) -> None:
    body = clients["admin"].get("/", **ZH).content.decode()
    for label in ("仪表盘", "消息", "死信", "主题", "业务线", "审计", "积压排行", "退出登录"):
        assert label in body, label
    for label in (">Dashboard<", ">Dead letters<", "Top backlogs", ">Log out<", ">Topics<"):
        assert label not in body, label
    # The chart's labels, which charts.js reads from its root.
    assert 'data-t-produced="生产"' in body and 'data-t-per-minutes="每 {n} 分钟"' in body


def test_it_shows_the_trace_events_in_chinese(clients: dict[str, Client], failed: Message) -> None:
    MessageTrace.objects.create(
        message_id=failed.id,
        event=TraceEvent.DEAD,
        actor="c1",
        at=failed.add_time,
        status_after="FAIL",
    )
    body = clients["admin"].get(f"/messages/{failed.id}/", **ZH).content.decode()
    assert "<strong>转入死信</strong>" in body
    with translation.override("en"):  # the catalog's list is the model's labels
        assert {str(label) for label in TraceEvent.labels} == {str(n) for n in TRACE_EVENT_NAMES}


def test_it_pushes_the_live_dashboard_in_the_page_language(
    transactional_db: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(consumers, "LIVE_SECONDS", 0.2)
    viewer = make_user("vera", "viewer", Biz.objects.create(name="shop"))

    client = Client()
    client.force_login(viewer)  # the socket reads the session again on every render
    session = f"{settings.SESSION_COOKIE_NAME}={client.session.session_key}"

    async def first_frame(headers: list[tuple[bytes, bytes]]) -> str:
        cookies = [v.decode() for k, v in headers if k == b"cookie"] + [session]
        others = [(k, v) for k, v in headers if k != b"cookie"]
        communicator = WebsocketCommunicator(_app(), "/ws/console/dashboard")
        communicator.scope["headers"] = [*others, (b"cookie", "; ".join(cookies).encode())]
        await communicator.connect()
        frame = await communicator.receive_from()
        await communicator.disconnect()
        return frame

    assert "积压排行" in async_to_sync(first_frame)([(b"accept-language", b"zh-CN,zh;q=0.9")])
    cookie = f"{settings.LANGUAGE_COOKIE_NAME}=zh-hans".encode()
    assert "积压排行" in async_to_sync(first_frame)([(b"cookie", cookie)])
    assert "Top backlogs" in async_to_sync(first_frame)([])


def test_it_shows_the_topics_list_in_english_without_a_header(
    clients: dict[str, Client], orders: Topic
) -> None:
    response = clients["admin"].get("/topics/")
    body = response.content.decode()
    assert response["Content-Language"] == "en"
    assert '<html lang="en">' in body and "Backlog" in body and "积压" not in body


def test_it_shows_the_login_page_in_chinese(db: object) -> None:
    body = Client().get("/login/", **ZH).content.decode()
    assert "登录 MQ Center" in body and "用户名" in body and "Username" not in body


def test_it_switches_language_with_the_header_form_and_keeps_it(
    clients: dict[str, Client], orders: Topic
) -> None:
    client = clients["admin"]
    page = client.get("/topics/").content.decode()
    assert 'action="/i18n/setlang/"' in page and 'name="language" value="zh-hans"' in page
    response = client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/topics/orders/"})
    assert response.status_code == 302 and response["Location"] == "/topics/orders/"
    assert client.cookies[settings.LANGUAGE_COOKIE_NAME].value == "zh-hans"
    # The cookie wins over the browser's English.
    body = client.get("/topics/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "积压" in body and 'name="language" value="en"' in body
    client.post("/i18n/setlang/", {"language": "en", "next": "/topics/"})
    assert "Backlog" in client.get("/topics/", **ZH).content.decode()


@pytest.mark.parametrize(
    "target", ["https://evil.example/", "//evil.example/x", "javascript:alert(1)"]
)
def test_it_redirects_the_switch_only_within_the_site(
    clients: dict[str, Client], target: str
) -> None:
    response = clients["admin"].post("/i18n/setlang/", {"language": "zh-hans", "next": target})
    assert response.status_code == 302 and response["Location"] == "/"


def test_it_refuses_the_switch_without_a_csrf_token(db: object) -> None:
    client = Client(enforce_csrf_checks=True)
    response = client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/login/"})
    assert response.status_code == 403
    assert settings.LANGUAGE_COOKIE_NAME not in client.cookies


def test_it_keeps_the_api_in_english_for_a_chinese_client(db: object) -> None:
    response = Client().get("/api/v1/topics", **ZH)
    assert response.status_code == 401
    message = response.json()["error"]["message"]
    assert message.isascii(), message


def test_it_shows_the_topic_page_with_groups_and_webhooks_without_english_labels(
    clients: dict[str, Client], orders: Topic
) -> None:
    Topic.objects.filter(id=orders.id).update(
        retry_count=0,
        max_backlog=500,
        alarm_webhooks=[{"url": "https://hooks.example.com/x", "format": "slack"}],
    )
    TopicGroup.objects.create(topic=orders, name="audit", subscribed=False)
    add_message("orders", Status.NEW)
    body = clients["admin"].get("/topics/orders/", **ZH).content.decode()
    for label in (
        "<h1>主题 orders</h1>",
        "orders 的消息",
        "该主题不做任何重试",
        "实时计数 · 更新于",
        '<th class="num">生产',
        "告警 Webhook",
        "发送测试告警",
        "最大积压",
        "未订阅",
    ):
        assert label in body, label
    for label in (
        ">Topic orders<",
        "Messages of orders",
        "retries nothing",
        "Live counts",
        "Produced (1 h)",
        "Alarm webhooks",
        "Send test alarm",
        "Max backlog",
        "Each alarm is also posted here",
        "Produce answers 429",
        "not subscribed",
        "by name only",
        "webhook URL 1",
    ):
        assert label not in body, label


def test_it_shows_the_message_list_and_detail_without_english_labels(
    clients: dict[str, Client], orders: Topic
) -> None:
    expired = add_message("orders", Status.EXPIRED)
    Message.objects.filter(id=expired.id).update(expires_at=expired.add_time, priority=7)
    listing = clients["admin"].get("/messages/?topic=orders", **ZH).content.decode()
    assert ">优先级<" in listing and "FAIL、TIMEOUT 或 EXPIRED" in listing
    for label in (">Priority<", ">any<", "select all", "dead (FAIL, TIMEOUT or EXPIRED)"):
        assert label not in listing, label
    detail = clients["admin"].get(f"/messages/{expired.id}/", **ZH).content.decode()
    assert "<dt>优先级</dt>" in detail and "未投递即过期" in detail and "剩余重试 0 次" in detail
    for label in (
        ">Priority<",
        "expired undelivered",
        "retries left",
        "Only NEW or PREPARED messages are cancelled",
        f"Delete message {expired.id}",
        "(keep EXPIRED)",
    ):
        assert label not in detail, label


# --- the catalog ------------------------------------------------------------------------


def po_entries(path: Path) -> tuple[dict[str, list[str]], list[str], set[str]]:
    """msgid (with msgctxt as `ctx\\x04id`) -> msgstr list; the msgids flagged fuzzy; the plural ones."""
    entries: dict[str, list[str]] = {}
    fuzzy: list[str] = []
    plural: set[str] = set()
    for block in path.read_text(encoding="utf-8").split("\n\n"):
        fields: dict[str, str] = {}
        key = ""
        for line in block.splitlines():
            if line.startswith("#~"):
                break  # obsolete entry
            if line.startswith("#"):
                fields["flags"] = fields.get("flags", "") + (line if line.startswith("#,") else "")
                continue
            head = re.match(r'^(msgctxt|msgid_plural|msgid|msgstr(?:\[\d+\])?) (".*")$', line)
            if head:
                key = head.group(1)
                fields[key] = ast.literal_eval(head.group(2))
            elif line.startswith('"'):
                fields[key] += ast.literal_eval(line)
        if "msgid" not in fields:
            continue
        msgid = (
            fields["msgid"]
            if "msgctxt" not in fields
            else f"{fields['msgctxt']}\x04{fields['msgid']}"
        )
        entries[msgid] = [v for k, v in sorted(fields.items()) if k.startswith("msgstr")]
        if "fuzzy" in fields.get("flags", ""):
            fuzzy.append(msgid)
        if "msgid_plural" in fields:
            plural.add(msgid)
    return entries, fuzzy, plural


def template_msgids() -> set[str]:
    """Every string the templates mark (as makemessages extracts them)."""
    found: set[str] = set()
    literal = r"""u?('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")"""
    call = re.compile(r"\b(?:n?gettext|_)\(" + literal)
    call_in_context = re.compile(r"\bn?pgettext\(" + literal + r",\s*" + literal)
    for path in [*ROOT.glob("templates/**/*.html"), *ROOT.glob("*/templates/**/*.html")]:
        code = templatize(path.read_text(encoding="utf-8"), origin=str(path))
        found.update(ast.literal_eval(msgid) for msgid in call.findall(code))
        found.update(
            f"{ast.literal_eval(ctx)}\x04{ast.literal_eval(msgid)}"
            for ctx, msgid in call_in_context.findall(code)
        )
    return found


def python_msgids() -> set[str]:
    """Every literal the console's Python code passes to gettext and its variants."""
    names = {"_", "gettext", "gettext_lazy", "gettext_noop", "ngettext", "ngettext_lazy"}
    with_context = {"pgettext", "pgettext_lazy"}
    found: set[str] = set()
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                    continue
                args = [a.value for a in node.args if isinstance(a, ast.Constant)]
                if node.func.id in names and args and isinstance(args[0], str):
                    found.add(args[0])
                elif node.func.id in with_context and len(args) >= 2:
                    found.add(f"{args[0]}\x04{args[1]}")
    return found


def test_it_translates_every_catalog_entry() -> None:
    entries, fuzzy, _ = po_entries(PO)
    untranslated = [msgid for msgid, strs in entries.items() if msgid and not all(strs)]
    assert (untranslated, fuzzy) == ([], [])
    for msgid, strs in entries.items():
        # A placeholder lost or misspelt in translation would raise or show raw at render time.
        assert sorted(re.findall(r"%\(\w+\)s", msgid)) == sorted(
            re.findall(r"%\(\w+\)s", strs[0])
        ), msgid


def test_it_has_every_marked_string_in_the_catalog() -> None:
    entries, _, _ = po_entries(PO)
    marked = template_msgids() | python_msgids()
    assert len(marked) > 200  # the extraction itself works
    missing = sorted(marked - set(entries))
    assert missing == [], "run makemessages (docs/console.md, Language) and translate: " + repr(
        missing[:10]
    )


def test_it_ships_a_compiled_catalog_matching_the_po() -> None:
    entries, _, plural = po_entries(PO)
    with MO.open("rb") as fh:
        compiled = gettext.GNUTranslations(fh)
    catalog = compiled._catalog  # type: ignore[attr-defined]
    expected: dict[object, str] = {}
    for msgid, strs in entries.items():
        if not msgid:
            continue
        # The plural entries are keyed (msgid, n) in a GNUTranslations catalog.
        if msgid in plural:
            expected.update({(msgid, n): s for n, s in enumerate(strs)})
        else:
            expected[msgid] = strs[0]
    compiled_entries = {k: v for k, v in catalog.items() if k != ""}
    assert compiled_entries == expected, "recompile: msgfmt -o django.mo django.po"
