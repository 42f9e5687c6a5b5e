"""MySQL column conversions: Django's, with a faster DATETIME parser.

mysqlclient reads every DATETIME through a Python function (`MySQLdb.times.DateTime_or_None`,
~1.5 us); a claimed message carries four of them, so a pull of 100 would spend ~0.6 ms of
the broker's CPU there (py-spy during `python -m bench e2e`). `datetime.fromisoformat`
reads MySQL's text (`2026-11-22 23:59:58.123456`) in ~0.16 us; what it refuses (a zero
date) goes to mysqlclient's own parser. Used as `OPTIONS["conv"]`.
"""

from __future__ import annotations

from datetime import datetime

from django.db.backends.mysql.base import django_conversions
from MySQLdb.constants import FIELD_TYPE
from MySQLdb.times import DateTime_or_None


def datetime_or_none(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return DateTime_or_None(text)


CONVERSIONS = {
    **django_conversions,
    FIELD_TYPE.DATETIME: datetime_or_none,
    FIELD_TYPE.TIMESTAMP: datetime_or_none,
}
