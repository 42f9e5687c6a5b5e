"""The document's patterns agree with the server's validators: every value the server accepts
matches the published pattern (read from the generated document), and the values the server
refuses answer 400 naming the field. Times are exact (pattern and server agree both ways);
cron is a superset (croniter's syntax), its description says what the server checks besides."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from messages.schedules.cron import cron_problem
from mqcenter.core.dates import parse_iso_datetime
from tests.conftest import Api
from tests.mqcenter.test_openapi_contract import document
from tests.support.api import expect_error

SCHEDULE = {"name": "ping", "topic": "orders.ping", "data": {"ping": 1}, "cron": "* * * * *", "timezone": "UTC"}

VALID_CRONS = [
    "* * * * *", "*/15 * * * *", "*/30 */12 * * *", "*/59 * * * *", "30 9 * * 1-5", "0 0 31 * *", "0 0 29 2 *",
    "0 0 L * *", "0 0 15W * *", "0 0 * * 5#3", "0 0 * * mon#2", "0 0 * * MON", "0 0 * JAN-MAR MON-FRI",
    "0 0 * * SUN-SAT", "0 0 * * fri-mon", "0 0 * * 7", "0 0 * * 0-7/2", "0-30/5 */2 1,15,31 */3 *",
    "0 0 1-31/2 * *", "1,2,3,4,5,6,7,8,9,10,11,12 * * * *", "*/5,10 * * * *", "0 0 ? * *", "0 0 1-5,L * *",
    "05 09 * * *", " 0 0 * * * ", "0\t0 * * *", "0  0  1  1  *", "59 23 31 12 7",
]
# The syntax is cron's (the pattern allows them); a range or the calendar is not.
CRONS_THE_SERVER_REFUSES = ["60 * * * *", "* 24 * * *", "0 0 32 * *", "0 0 0 * *", "0 0 * 13 *", "0 0 * * 8",
                            "*/0 * * * *", "0 0 30 2 *", "0 0 31 4 *", "0 0 LW * *", "0 0 * * L", "H * * * *"]
# Neither allows them: not five fields of cron's characters.
CRONS_THE_PATTERN_REFUSES = ["", "* * * *", "* * * * * *", "0 0 * * 1%2", "0\xa00 * * *", "every day", "0 0 * * mon;"]

VALID_TIMES = [
    "2024-01-31T23:59:59Z", "2024-03-31T00:00:00+08:00", "2024-05-31T12:00:00-05:30", "2024-04-30T00:00:00Z",
    "2024-02-29T12:00:00.123456+00:00", "2000-02-29T00:00:00Z", "2023-02-28T00:00:00.5Z", "2024-12-31t10:00:00Z",
    "2024-08-31T10:00:00.123456789-00:00", "2024-10-29T10:00:00+23:59", "0002-01-01T00:00:00Z",
    "9998-12-31T23:59:59-23:59", "2400-02-29T00:00:00Z",
]
INVALID_TIMES = [
    "2023-02-29T00:00:00Z", "1900-02-29T00:00:00Z", "2024-02-30T00:00:00Z", "2024-04-31T00:00:00Z",
    "2024-06-31T00:00:00Z", "2024-01-32T00:00:00Z", "2024-13-01T00:00:00Z", "2024-01-31T10:00:00",
    "2024-01-31T24:00:00Z", "2024-01-31T10:60:00Z", "2024-01-31T10:00:60Z", "2024-01-31T10:00:00z",
    "2024-01-31T10:00:00+24:00", "2024-01-31T10:00:00+08:75", "0001-01-01T00:00:00Z", "9999-01-01T00:00:00Z", "2024-01-31",
    "2024-01-31T10:00:00." + "1" * 50 + "Z",
]


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return document()


def _matches(schema: dict[str, Any], value: str) -> bool:
    """JSON Schema's reading of `pattern` (a search; the patterns anchor themselves) and `maxLength`."""
    return re.search(schema["pattern"], value) is not None and len(value) <= schema.get("maxLength", len(value))


def _cron(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["components"]["schemas"]["ScheduleRequest"]["properties"]["cron"]


def _query_time(doc: dict[str, Any], path: str, name: str) -> dict[str, Any]:
    [parameter] = [p for p in doc["paths"][path]["get"]["parameters"] if p["name"] == name]
    return parameter["schema"]


def _body_time(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["components"]["schemas"]["ProduceMessageRequest"]["properties"]["effect_time"]


@pytest.mark.parametrize("cron", VALID_CRONS)
def test_a_cron_the_server_accepts_matches_the_pattern(doc: dict[str, Any], shop_admin_api: Api, cron: str) -> None:
    assert _matches(_cron(doc), cron), cron
    for cron_field in (cron, "0 0 1 1 *"):  # created, then edited to it
        response = shop_admin_api.post("/api/v1/schedules", {**SCHEDULE, "cron": cron_field})
        assert response.status_code == 201, response.content
        edit = shop_admin_api.patch(f"/api/v1/schedules/{response.json()['id']}", {"cron": cron})
        assert edit.status_code == 200, edit.content
        shop_admin_api.delete(f"/api/v1/schedules/{response.json()['id']}")


@pytest.mark.parametrize("cron", CRONS_THE_SERVER_REFUSES + CRONS_THE_PATTERN_REFUSES)
def test_a_cron_the_server_refuses_answers_400_naming_the_field(doc: dict[str, Any], shop_admin_api: Api,
                                                                   cron: str) -> None:
    expect_error(shop_admin_api.post("/api/v1/schedules", {**SCHEDULE, "cron": cron}), 400, "invalid_request", "cron")
    assert _matches(_cron(doc), cron) is (cron in CRONS_THE_SERVER_REFUSES), cron


def test_the_cron_description_says_what_the_pattern_does_not(doc: dict[str, Any]) -> None:
    text = _cron(doc)["description"]
    assert "croniter" in text and "details.field" in text and "range" in text


_CRON_ITEMS = st.sampled_from(["*", "?", "0", "5", "05", "7", "12", "15", "23", "28", "29", "31", "59", "L", "15W",
                               "MON", "jan", "sun", "5#3", "1-5", "MON-FRI", "JAN-MAR", "*/15", "*/45", "0-30/5"])
_CRON_FIELDS = st.lists(_CRON_ITEMS, min_size=1, max_size=3).map(",".join)
_SPACE = st.sampled_from([" ", "  ", "\t"])


@settings(max_examples=400, deadline=None)
@given(fields=st.lists(_CRON_FIELDS, min_size=5, max_size=5), space=_SPACE)
def test_every_generated_cron_the_server_accepts_matches_the_pattern(fields: list[str], space: str) -> None:
    cron = space.join(fields)
    if cron_problem(cron) is None:
        assert _matches(_cron(document_once()), cron), cron


@pytest.mark.parametrize("value", VALID_TIMES)
def test_a_time_the_server_accepts_matches_the_patterns(doc: dict[str, Any], admin_api: Api, value: str) -> None:
    assert _matches(_body_time(doc), value), value
    for path, name in (("/api/v1/messages", "added_after"), ("/api/v1/archive/messages", "finished_before")):
        assert _matches(_query_time(doc, path, name), value), (name, value)
        response = admin_api.get(path, {name: value})
        assert response.status_code == 200, response.content


@pytest.mark.parametrize("value", INVALID_TIMES)
def test_a_time_the_server_refuses_answers_400_and_the_patterns_refuse_it(doc: dict[str, Any], admin_api: Api,
                                                                          value: str) -> None:
    assert not _matches(_body_time(doc), value), value
    for path, name in (("/api/v1/messages", "added_after"), ("/api/v1/archive/messages", "finished_before")):
        assert not _matches(_query_time(doc, path, name), value), (name, value)
        expect_error(admin_api.get(path, {name: value}), 400, "invalid_request", name)
    assert _matches(_query_time(doc, "/api/v1/messages", "added_after"), "")  # empty: no filter


_DIGITS = st.integers(min_value=0, max_value=99).map("{:02d}".format)


@settings(max_examples=500, deadline=None)
@given(year=st.integers(min_value=1, max_value=9999), month=_DIGITS, day=_DIGITS, hour=_DIGITS, minute=_DIGITS,
       second=_DIGITS, fraction=st.sampled_from(["", ".5", ".123456", ".1234567"]),
       offset=st.sampled_from(["Z", "z", "+00:00", "-05:30", "+23:59", "+24:00", "-12:60", ""]),
       separator=st.sampled_from(["T", "t"]))
def test_the_time_pattern_and_the_server_agree_on_rfc_3339_shapes(year: int, month: str, day: str, hour: str,
                                                                   minute: str, second: str, fraction: str,
                                                                   offset: str, separator: str) -> None:
    value = f"{year:04d}-{month}-{day}{separator}{hour}:{minute}:{second}{fraction}{offset}"
    parsed = parse_iso_datetime(value)
    server = parsed is not None and parsed.tzinfo is not None
    assert _matches(_body_time(document_once()), value) is server, value
    assert _matches(_query_time(document_once(), "/api/v1/messages", "added_before"), value) is server, value


_DOCUMENT: list[dict[str, Any]] = []


def document_once() -> dict[str, Any]:
    """The document for the property tests (hypothesis's tests take no module fixtures)."""
    if not _DOCUMENT:
        _DOCUMENT.append(document())
    return _DOCUMENT[0]
