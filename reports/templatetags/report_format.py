"""Template filters for report figures (see reports/formatting.py)."""

from __future__ import annotations

from typing import Any

from django import template

from reports import formatting

register = template.Library()


@register.filter
def moment(value: str | None) -> str:
    return formatting.human_moment(value)


@register.filter
def age(seconds: float | None) -> str:
    return formatting.human_age(seconds)


@register.filter
def hours(value: float | None) -> str:
    return formatting.human_hours(value)


@register.filter
def drain(row: dict[str, Any]) -> str:
    return formatting.human_drain(row)


@register.filter
def window(params: dict[str, Any] | None) -> str:
    params = params or {}
    return formatting.human_window(params.get("since"), params.get("until"))


@register.simple_tag
def messages_url(topic: str, group: str | None = None, status: str | None = None,
                 added_after: str | None = None, added_before: str | None = None) -> str:
    return formatting.message_list_url(topic=topic, group=group, status=status,
                                       added_after=added_after, added_before=added_before)
