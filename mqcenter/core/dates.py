"""Reading datetimes from untrusted text."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from django.utils.dateparse import parse_datetime

# An offset's minutes past 59: Python's parser refuses them, Django's fallback reads "+08:75"
# as +09:15. No ISO 8601 offset has them, and the OpenAPI document's pattern refuses them.
_OFFSET_MINUTES_PAST_59 = re.compile(r"[+-][0-9]{2}:?[6-9][0-9]\Z")


def parse_iso_datetime(value: Any) -> datetime | None:
    """An ISO 8601 datetime, or None for anything else, including well-formed but impossible
    values (minute 99, month 13) on which Django's parser raises instead, and times at the
    edges of the calendar whose offset puts them outside it in UTC (year 1 or 9999)."""
    if not isinstance(value, str) or len(value) > 64 or _OFFSET_MINUTES_PAST_59.search(value):
        return None
    try:
        parsed = parse_datetime(value)
        if parsed is not None and parsed.tzinfo is not None:
            parsed.astimezone(UTC)  # raises OverflowError past year 9999 or before year 1
    except (ValueError, OverflowError):
        return None
    # Naive values too: they are read as UTC, and windows and delays computed from them
    # (a report's default start a day before its end) leave the calendar.
    if parsed is not None and parsed.year in (1, 9999):  # the database's own range
        return None
    return parsed
