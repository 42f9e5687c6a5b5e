"""Subscription filters: which subscribed groups a publish is copied to.

A group's filter is `{"tags": [...]}` (the message's tag is one of them) or
`{"expression": "..."}` (messages/routing/expression.py). A publish reads its topic's
subscriptions under the topic's shared lock (`subscriptions_locked`) and copies each message
only to the groups whose filter matches (`copies_for`); what a filter kept from its group is
counted in the publish's transaction (`skipped_record`). Setting a filter takes the topic's
exclusive lock, so every publish sees either the old filter or the new one whole.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.db import connection

from messages.routing.expression import ExpressionError, compile_expression
from mqcenter.core.errors import InvalidRequest
from topics.locks import lock_topic

TAG_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,64}\Z")
MAX_FILTER_TAGS = 100
SKIP_SLOTS = 8

Matcher = Callable[[str | None, Mapping[str, str]], bool]


def tag_check(value: Any, field: str) -> str:
    """A message's tag: 1-64 letters, digits and `_.:-` (400 naming the field otherwise)."""
    if not isinstance(value, str) or not TAG_RE.match(value):
        raise InvalidRequest(f"{field}: must be 1-64 characters of letters, digits and _.:-.", details={"field": field})
    return value


def filter_parse(value: Any, field: str = "filter") -> dict[str, Any] | None:
    """A subscription filter as a request gives it, checked: None (no filter), `{"tags":
    [...]}` or `{"expression": "..."}`. A bad expression answers 400 with `details.position`."""
    if value is None:
        return None
    if not isinstance(value, dict) or len(value) != 1 or not ({"tags", "expression"} & value.keys()):
        raise InvalidRequest(f'{field} must be {{"tags": [...]}}, {{"expression": "..."}} or null.',
                             details={"field": field})
    if "tags" in value:
        tags = value["tags"]
        if not isinstance(tags, list) or not tags or len(tags) > MAX_FILTER_TAGS:
            raise InvalidRequest(f"{field}.tags must be a list of 1 to {MAX_FILTER_TAGS} tags.",
                                 details={"field": f"{field}.tags"})
        return {"tags": sorted({tag_check(tag, f"{field}.tags[{i}]") for i, tag in enumerate(tags)})}
    source = value["expression"]
    if not isinstance(source, str):
        raise InvalidRequest(f"{field}.expression must be a string.", details={"field": f"{field}.expression"})
    try:
        compile_expression(source)
    except ExpressionError as exc:
        raise InvalidRequest(
            f"{field}.expression: {exc}.", details={"field": f"{field}.expression", "position": exc.position}
        ) from exc
    return {"expression": source}


@lru_cache(maxsize=1024)
def _matcher(text: str) -> Matcher:
    """The matcher of a stored filter (its JSON text), compiled once per process."""
    spec = json.loads(text)
    if "tags" in spec:
        tags = frozenset(spec["tags"])
        return lambda tag, headers: tag in tags
    predicate = compile_expression(spec["expression"])
    return lambda tag, headers: predicate(tag, headers) is True


def filter_matcher(spec: dict[str, Any] | str | None) -> Matcher | None:
    if spec is None:
        return None
    return _matcher(spec if isinstance(spec, str) else json.dumps(spec, sort_keys=True))


@dataclass(frozen=True, slots=True)
class Subscription:
    id: int | None
    name: str
    matches: Matcher | None  # None: every publish


# Per topic id, the subscriptions this process last read and the topic's
# `subscriptions_version` then: a cache the version validates on every use.
_read_at: dict[int, tuple[int, list[Subscription]]] = {}
_READ_AT_MAX = 10_000  # topics; past it, forgotten at once and read again


def subscriptions_locked(topic_pk: int) -> list[Subscription]:
    """Lock the topic shared (`lock_topic`) and answer its subscriptions. The lock answers
    the topic's `subscriptions_version`, which every change of its groups' subscriptions or
    filters replaces under the exclusive lock; at the value of this process's last read, that
    read is still the topic's, and a publish costs one statement here, not two."""
    version = lock_topic(topic_pk, share=True)
    seen = _read_at.get(topic_pk)
    if seen is not None and version is not None and seen[0] == version:
        return seen[1]
    subscriptions = subscriptions_read(topic_pk)
    if version is not None:
        if len(_read_at) >= _READ_AT_MAX:
            _read_at.clear()
        _read_at[topic_pk] = (version, subscriptions)
    return subscriptions


def subscriptions_read(topic_pk: int) -> list[Subscription]:
    """The topic's subscribed groups with their filters, in name order, read after
    `lock_topic(share=True)`: at READ COMMITTED a statement sees every group committed before
    it started, so none subscribed before the lock is missed."""
    table = connection.ops.quote_name("topics_topicgroup")
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, name, filter_spec FROM {table} WHERE topic_id = %s AND subscribed = %s ORDER BY name",  # noqa: S608 - a quoted table name
            [topic_pk, True],
        )
        rows = cursor.fetchall()
    return [Subscription(pk, name, None if spec is None else filter_matcher(_spec_text(spec))) for pk, name, spec in rows]


def _spec_text(spec: Any) -> str | dict[str, Any]:
    # MySQL hands a JSON column back as text, PostgreSQL as the decoded value; JSON null
    # (a filter removed) is stored as SQL NULL by filter_set.
    if isinstance(spec, str):
        return json.dumps(json.loads(spec), sort_keys=True)
    return spec  # type: ignore[no-any-return]


def copies_for(subscriptions: list[Subscription], tag: str | None, headers: Mapping[str, str],
               skipped: Counter[int]) -> list[str]:
    """The groups a publish with `tag` and `headers` is copied to; each group its filter kept
    it from is counted in `skipped` (by group id)."""
    chosen = []
    for subscription in subscriptions:
        if subscription.matches is None or subscription.matches(tag, headers or {}):
            chosen.append(subscription.name)
        elif subscription.id is not None:
            skipped[subscription.id] += 1
    return chosen


def skipped_record(skipped: Counter[int]) -> None:
    """Add to the filtered groups' skip counts, in the caller's (the publish's) transaction:
    one UPDATE of one random slot per group, in group order (no deadlock between publishes)."""
    if not skipped:
        return
    ids = sorted(skipped)
    table = connection.ops.quote_name("topics_groupfilterskips")
    cases = " ".join(f"WHEN {int(pk)} THEN {int(skipped[pk])}" for pk in ids)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET skipped = skipped + CASE group_id {cases} END "  # noqa: S608 - integers only
            f"WHERE slot = %s AND group_id IN ({','.join(str(int(pk)) for pk in ids)})",
            [random.randrange(SKIP_SLOTS)],
        )


def skipped_reset(group_id: int) -> None:
    """A filter was set, changed or removed: its count starts from zero (every slot present)."""
    from topics.models import GroupFilterSkips

    GroupFilterSkips.objects.filter(group_id=group_id).delete()
    GroupFilterSkips.objects.bulk_create(
        [GroupFilterSkips(group_id=group_id, slot=slot, skipped=0) for slot in range(SKIP_SLOTS)]
    )


def filtered_out(group_id: int) -> int:
    """Publishes the group's filter kept from it since the filter was set."""
    from django.db.models import Sum

    from topics.models import GroupFilterSkips

    return GroupFilterSkips.objects.filter(group_id=group_id).aggregate(n=Sum("skipped"))["n"] or 0
