"""Subscription filter expressions: what they match, SQL's three-valued logic, and the
position a bad expression names."""

from __future__ import annotations

import pytest

from messages.routing.expression import ExpressionError, compile_expression


def matches(source: str, tag: str | None = None, **headers: str) -> bool | None:
    return compile_expression(source)(tag, headers)


@pytest.mark.parametrize(("source", "tag", "headers", "expected"), [
    ("tag IN ('a','b') AND region = 'eu' AND amount > 100", "a", {"region": "eu", "amount": "150"}, True),
    ("tag IN ('a','b') AND region = 'eu' AND amount > 100", "c", {"region": "eu", "amount": "150"}, False),
    ("tag IN ('a','b') AND region = 'eu' AND amount > 100", "a", {"region": "eu", "amount": "99.5"}, False),
    ("amount > 100", None, {"amount": "1e3"}, True),  # numeric, not "1e3" > "100" as text
    ("amount > 100", None, {"amount": "abc"}, None),  # a number against text: unknown
    ("amount > '100'", None, {"amount": "2"}, True),  # text against text: compared as text
    ("amount BETWEEN 10 AND 20", None, {"amount": "20"}, True),
    ("amount NOT BETWEEN 10 AND 20", None, {"amount": "21"}, True),
    ("region IS NULL", None, {}, True),
    ("region IS NOT NULL", None, {}, False),
    ("region = 'eu'", None, {}, None),  # a missing header is NULL
    ("NOT region = 'eu'", None, {}, None),  # NOT unknown stays unknown
    ("region = 'eu' OR tag = 'x'", "x", {}, True),  # unknown OR true
    ("region = 'eu' AND tag = 'x'", "y", {}, False),  # unknown AND false
    ("NOT (tag = 'a' OR tag = 'b')", "c", {}, True),
    ("tag NOT IN ('a', 'b')", "c", {}, True),
    ("code IN (1, 2)", None, {"code": "2.0"}, True),
    ("\"x-trace\" <> 'q' and Tag = 'T'", "T", {"x-trace": "r"}, True),  # keywords, `tag`, any case
    ("name = 'O''Brien'", None, {"name": "O'Brien"}, True),
    ("a = b", None, {"a": "1", "b": "1"}, True),
    ("a != b", None, {"a": "1", "b": "2"}, True),
])
def test_it_evaluates(source: str, tag: str | None, headers: dict[str, str], expected: bool | None) -> None:
    assert matches(source, tag, **headers) is expected


@pytest.mark.parametrize(("source", "position", "reason"), [
    ("tag IN ('a'", 11, "expected , or ), found the end"),
    ("tag = ", 6, "expected a name, a string or a number, found the end"),
    ("region = 'eu' AND", 17, "expected a name"),
    ("amount >> 3", 8, "expected a name, a string or a number, found '>'"),
    ("(tag = 'a'", 10, "expected )"),
    ("tag = 'a' tag", 10, "expected AND, OR or the end"),
    ("tag = 'a' ; drop", 10, "unexpected character ';'"),
    ("region", 6, "expected a comparison, IN, BETWEEN or IS"),
    ("tag IS 'x'", 7, "expected NULL"),
    ("tag = 'open", 6, "unexpected character"),
    ("", 0, "the expression is empty"),
    ("__import__('os').system('x')", 16, "unexpected character '.'"),
])
def test_a_bad_expression_names_its_position(source: str, position: int, reason: str) -> None:
    with pytest.raises(ExpressionError) as raised:
        compile_expression(source)
    assert raised.value.position == position
    assert raised.value.reason.startswith(reason.split(",")[0]) and reason in str(raised.value)


def test_nesting_is_bounded() -> None:
    with pytest.raises(ExpressionError, match="nested too deeply"):
        compile_expression("(" * 200 + "tag = 'a'" + ")" * 200)
    with pytest.raises(ExpressionError, match="nested too deeply"):
        compile_expression("NOT " * 200 + "tag = 'a'")
