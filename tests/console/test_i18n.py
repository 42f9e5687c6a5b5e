"""The console in Simplified Chinese: chosen from Accept-Language or the header's switch,
English by default, the API always English; and the committed catalog complete and compiled."""

from __future__ import annotations

import ast
import gettext
import re
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client
from django.utils.translation.template import templatize

from topics.models import Topic

ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-CN,zh;q=0.9,en;q=0.5"}
ROOT = Path(settings.BASE_DIR)
PO = ROOT / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po"
MO = PO.with_suffix(".mo")
APPS = ("mqcenter", "messages", "topics", "registry", "reports")


def test_it_shows_the_topic_page_in_chinese_to_a_chinese_browser(
    clients: dict[str, Client], orders: Topic
) -> None:
    body = clients["admin"].get("/topics/orders/", **ZH).content.decode()
    assert '<html lang="zh-hans">' in body
    assert "主题 orders" in body and "消费组" in body and "积压" in body
    assert "Backlog" not in body and "Consumer groups" not in body


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
    call = re.compile(r"""\b(?:n?gettext|_)\(u?('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")
    for path in [*ROOT.glob("templates/**/*.html"), *ROOT.glob("*/templates/**/*.html")]:
        for literal in call.findall(templatize(path.read_text(encoding="utf-8"), origin=str(path))):
            found.add(ast.literal_eval(literal))
    return found


def python_msgids() -> set[str]:
    """Every literal the console's Python code passes to gettext and its variants."""
    names = {"_", "gettext", "gettext_lazy", "ngettext", "ngettext_lazy"}
    found: set[str] = set()
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id in names
                ):
                    first = node.args[0] if node.args else None
                    if isinstance(first, ast.Constant) and isinstance(first.value, str):
                        found.add(first.value)
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
