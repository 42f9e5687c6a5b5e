"""Subscription filter expressions: a small SQL-92-like language over a message's `tag` and
headers, parsed by hand (recursive descent) into a tree of closures; never `eval`.

    expression := or
    or         := and ("OR" and)*
    and        := not ("AND" not)*
    not        := "NOT" not | predicate
    predicate  := "(" expression ")"
                | operand ( compare operand
                          | ["NOT"] "IN" "(" literal ("," literal)* ")"
                          | ["NOT"] "BETWEEN" operand "AND" operand
                          | "IS" ["NOT"] "NULL" )
    operand    := identifier | 'string' | number
    compare    := "=" | "<>" | "!=" | "<" | "<=" | ">" | ">="

An identifier is `tag` (the message's tag) or a header name (letters, digits and `_.:-`,
starting with a letter or `_`; or any name in double quotes). Keywords are case-insensitive.
Values are strings; a comparison is numeric where both sides are numbers (a number literal
against a header that reads as a number), a string comparison where both are strings, and
unknown otherwise. Logic is SQL's three-valued one: a missing header is NULL, a comparison
with NULL is unknown, and a message is copied only where the whole expression is true.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache

MAX_LENGTH = 2000
MAX_DEPTH = 50

# (value of a message's tag, its headers) -> True, False or None (unknown)
Predicate = Callable[[str | None, Mapping[str, str]], bool | None]
Value = str | float | None
Operand = Callable[[str | None, Mapping[str, str]], Value]

KEYWORDS = {"AND", "OR", "NOT", "IN", "BETWEEN", "IS", "NULL"}
_TOKEN = re.compile(
    r"""\s*(?:
      (?P<string>'(?:[^']|'')*')
    | (?P<number>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
    | (?P<quoted>"[^"]+")
    | (?P<word>[A-Za-z_][A-Za-z0-9_.:-]*)
    | (?P<op><>|!=|<=|>=|=|<|>|\(|\)|,)
    )""",
    re.VERBOSE,
)


class ExpressionError(ValueError):
    """A filter expression that does not parse: `position` is the 0-based character offset."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(f"{message} at position {position}")
        self.reason = message
        self.position = position


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # string, number, name, keyword, op, end
    text: str
    value: Value
    position: int


def _tokens(source: str) -> list[Token]:
    tokens: list[Token] = []
    position = 0
    while True:
        while position < len(source) and source[position].isspace():
            position += 1
        if position >= len(source):
            tokens.append(Token("end", "", None, position))
            return tokens
        match = _TOKEN.match(source, position)
        if match is None or match.end() == position:
            raise ExpressionError(f"unexpected character {source[position]!r}", position)
        start = match.start(match.lastgroup or "op")
        kind, text = match.lastgroup or "op", match.group(match.lastgroup or "op")
        if kind == "string":
            tokens.append(Token("string", text, text[1:-1].replace("''", "'"), start))
        elif kind == "number":
            value = float(text)
            if not math.isfinite(value):
                raise ExpressionError("number out of range", start)
            tokens.append(Token("number", text, value, start))
        elif kind == "quoted":
            tokens.append(Token("name", text, text[1:-1], start))
        elif kind == "word" and text.upper() in KEYWORDS:
            tokens.append(Token("keyword", text.upper(), None, start))
        elif kind == "word":
            tokens.append(Token("name", text, text, start))
        else:
            tokens.append(Token("op", text, None, start))
        position = match.end()


def _number(value: Value) -> float | None:
    if isinstance(value, float):
        return value
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _compare(left: Value, right: Value, op: str) -> bool | None:
    """SQL comparison of two values; None (unknown) with a NULL or mismatched kinds."""
    if left is None or right is None:
        return None
    a: str | float
    b: str | float
    if isinstance(left, float) or isinstance(right, float):
        a, b = _number(left), _number(right)  # type: ignore[assignment]
        if a is None or b is None:
            return None
    else:
        a, b = left, right
    if op == "=":
        return a == b
    if op in ("<>", "!="):
        return a != b
    if op == "<":
        return a < b  # type: ignore[operator]
    if op == "<=":
        return a <= b  # type: ignore[operator]
    if op == ">":
        return a > b  # type: ignore[operator]
    return a >= b  # type: ignore[operator]


def _and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _or(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def _not(a: bool | None) -> bool | None:
    return None if a is None else not a


class _Parser:
    def __init__(self, source: str) -> None:
        self.tokens = _tokens(source)
        self.index = 0
        self.depth = 0

    @property
    def token(self) -> Token:
        return self.tokens[self.index]

    def take(self) -> Token:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def accept(self, kind: str, text: str) -> bool:
        if self.token.kind == kind and self.token.text == text:
            self.index += 1
            return True
        return False

    def expect(self, kind: str, text: str) -> None:
        if not self.accept(kind, text):
            raise self.error(f"expected {text}")

    def error(self, message: str) -> ExpressionError:
        token = self.token
        found = "the end" if token.kind == "end" else repr(token.text)
        return ExpressionError(f"{message}, found {found}", token.position)

    def parse(self) -> Predicate:
        if self.token.kind == "end":
            raise self.error("expected an expression")
        predicate = self.disjunction()
        if self.token.kind != "end":
            raise self.error("expected AND, OR or the end")
        return predicate

    def disjunction(self) -> Predicate:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error("expression nested too deeply")
        terms = [self.conjunction()]
        while self.accept("keyword", "OR"):
            terms.append(self.conjunction())
        self.depth -= 1
        if len(terms) == 1:
            return terms[0]

        def any_of(tag: str | None, headers: Mapping[str, str]) -> bool | None:
            result: bool | None = False
            for term in terms:
                result = _or(result, term(tag, headers))
                if result is True:
                    return True
            return result

        return any_of

    def conjunction(self) -> Predicate:
        terms = [self.negation()]
        while self.accept("keyword", "AND"):
            terms.append(self.negation())
        if len(terms) == 1:
            return terms[0]

        def all_of(tag: str | None, headers: Mapping[str, str]) -> bool | None:
            result: bool | None = True
            for term in terms:
                result = _and(result, term(tag, headers))
                if result is False:
                    return False
            return result

        return all_of

    def negation(self) -> Predicate:
        if self.accept("keyword", "NOT"):
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise self.error("expression nested too deeply")
            inner = self.negation()
            self.depth -= 1
            return lambda tag, headers: _not(inner(tag, headers))
        return self.predicate()

    def predicate(self) -> Predicate:
        if self.accept("op", "("):
            inner = self.disjunction()
            self.expect("op", ")")
            return inner
        left = self.operand()
        token = self.token
        if token.kind == "op" and token.text in ("=", "<>", "!=", "<", "<=", ">", ">="):
            self.take()
            right = self.operand()
            op = token.text
            return lambda tag, headers: _compare(left(tag, headers), right(tag, headers), op)
        if self.accept("keyword", "IS"):
            negated = self.accept("keyword", "NOT")
            self.expect("keyword", "NULL")
            if negated:
                return lambda tag, headers: left(tag, headers) is not None
            return lambda tag, headers: left(tag, headers) is None
        negated = self.accept("keyword", "NOT")
        if self.accept("keyword", "IN"):
            return self._maybe_not(self.membership(left), negated)
        if self.accept("keyword", "BETWEEN"):
            low = self.operand()
            self.expect("keyword", "AND")
            high = self.operand()

            def between(tag: str | None, headers: Mapping[str, str]) -> bool | None:
                value = left(tag, headers)
                return _and(_compare(value, low(tag, headers), ">="), _compare(value, high(tag, headers), "<="))

            return self._maybe_not(between, negated)
        raise self.error("expected a comparison, IN, BETWEEN or IS")

    @staticmethod
    def _maybe_not(predicate: Predicate, negated: bool) -> Predicate:
        return (lambda tag, headers: _not(predicate(tag, headers))) if negated else predicate

    def membership(self, left: Operand) -> Predicate:
        self.expect("op", "(")
        values: list[Value] = []
        while True:
            token = self.token
            if token.kind not in ("string", "number"):
                raise self.error("expected a string or number")
            values.append(self.take().value)
            if self.accept("op", ")"):
                break
            if not self.accept("op", ","):
                raise self.error("expected , or )")
        strings = frozenset(v for v in values if isinstance(v, str))
        numbers = [v for v in values if isinstance(v, float)]

        def member(tag: str | None, headers: Mapping[str, str]) -> bool | None:
            value = left(tag, headers)
            if value is None:
                return None
            if isinstance(value, str) and value in strings:
                return True
            if numbers:
                number = _number(value)
                if number is not None and number in numbers:
                    return True
            return False

        return member

    def operand(self) -> Operand:
        token = self.token
        if token.kind in ("string", "number"):
            self.take()
            value = token.value
            return lambda tag, headers: value
        if token.kind == "name":
            self.take()
            name = str(token.value)
            if name.lower() == "tag" and token.text == name:
                return lambda tag, headers: tag
            return lambda tag, headers: headers.get(name)
        raise self.error("expected a name, a string or a number")


@lru_cache(maxsize=1024)
def compile_expression(source: str) -> Predicate:
    """The predicate of `source`; ExpressionError (with the position) when it does not parse.
    Cached: a publish reads each group's expression text and finds its compiled form here."""
    if not isinstance(source, str) or not source.strip():
        raise ExpressionError("the expression is empty", 0)
    if len(source) > MAX_LENGTH:
        raise ExpressionError(f"the expression is longer than {MAX_LENGTH} characters", MAX_LENGTH)
    return _Parser(source).parse()
