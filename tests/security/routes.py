"""The API's routes, read from the URL configuration (never hand-listed), for tests that
must cover every endpoint: one added later is covered automatically."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.urls import URLPattern, URLResolver, get_resolver

HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
# Sample values for path converters, so each route can be called.
CONVERTER_SAMPLES = {"int": "1", "str": "sample", "slug": "sample", "path": "sample", "uuid": "00000000-0000-0000-0000-000000000000"}


@dataclass(frozen=True)
class Route:
    pattern: str  # e.g. "api/v1/messages/<int:message_id>"
    name: str
    methods: tuple[str, ...]
    view: object

    def url(self, **values: str) -> str:
        def fill(match: re.Match[str]) -> str:
            converter, name = match.group(1) or "str", match.group(2)
            return values.get(name, CONVERTER_SAMPLES.get(converter, "sample"))

        return "/" + re.sub(r"<(?:(\w+):)?(\w+)>", fill, self.pattern)

    @property
    def schema_path(self) -> str:
        return "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", self.pattern)


def _walk(patterns, prefix: str = ""):  # type: ignore[no-untyped-def]
    for entry in patterns:
        if isinstance(entry, URLResolver):
            yield from _walk(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern), entry


def view_methods(callback: object) -> tuple[str, ...]:
    view_class = getattr(callback, "view_class", None) or getattr(callback, "cls", None)
    if view_class is not None:
        return tuple(m for m in HTTP_METHODS if hasattr(view_class, m.lower()))
    return ("GET",)


def api_routes() -> list[Route]:
    """Every route under /api/v1/ with every method its view implements."""
    routes = []
    for pattern, entry in _walk(get_resolver().url_patterns):
        if not pattern.startswith("api/v1/"):
            continue
        callback = entry.callback
        routes.append(Route(pattern=pattern, name=entry.name or pattern, methods=view_methods(callback), view=callback))
    return routes
