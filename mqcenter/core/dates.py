"""Reading datetimes from untrusted text."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils.dateparse import parse_datetime


def parse_iso_datetime(value: Any) -> datetime | None:
    """An ISO 8601 datetime, or None for anything else, including well-formed but impossible
    values (minute 99, month 13) on which Django's parser raises instead."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        return parse_datetime(value)
    except ValueError:
        return None
