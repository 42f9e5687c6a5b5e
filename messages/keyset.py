"""Keyset pagination on id, newest first: each page is one index range scan whatever the
table size, and there is never a COUNT. Shared by the live and the archive search."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from django.db.models import QuerySet

from mqcenter.core.errors import InvalidRequest

PAGE_SIZE = 50


MAX_PAGE_SIZE = 500


def cursor_encode(last_id: int) -> str:
    return base64.urlsafe_b64encode(f"id:{last_id}".encode()).decode().rstrip("=")


def cursor_decode(cursor: str) -> int:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        kind, _, value = raw.partition(":")
        if kind != "id":
            raise ValueError(kind)
        return int(value)
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise InvalidRequest("cursor is not one this API returned.", details={"field": "cursor"}) from exc


def keyset_page(rows: QuerySet[Any], cursor: str | None, limit: int) -> tuple[list[Any], str | None]:
    """One page of `rows`, newest first, after `cursor`; and the cursor of the next page."""
    limit = max(1, min(limit, MAX_PAGE_SIZE))
    if cursor:
        rows = rows.filter(id__lt=cursor_decode(cursor))
    page = list(rows.order_by("-id")[: limit + 1])
    next_cursor = cursor_encode(page[limit - 1].id) if len(page) > limit else None
    return page[:limit], next_cursor
