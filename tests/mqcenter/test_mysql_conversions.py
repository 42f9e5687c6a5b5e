"""The broker's MySQL connections read DATETIME with `datetime.fromisoformat`, and read every
value as mysqlclient's own parser does."""

from __future__ import annotations

from datetime import datetime

import pytest
from django.db import connection
from MySQLdb.times import DateTime_or_None

from mqcenter.mysql_conversions import datetime_or_none

TEXTS = ["2026-11-22 23:59:58.123456", "2026-11-22 23:59:58", "2026-11-22 23:59:58.5", "2026-01-02 03:04:05.000100",
         "0000-00-00 00:00:00", "2026-02-30 00:00:00", "not a time"]


@pytest.mark.parametrize("text", TEXTS)
def test_it_parses_as_mysqlclient_does(text):
    assert datetime_or_none(text) == DateTime_or_None(text)


@pytest.mark.django_db
def test_the_connection_uses_it():
    with connection.cursor() as cursor:
        cursor.execute("SELECT CAST('2026-11-22 23:59:58.123456' AS DATETIME(6)), CAST(NULL AS DATETIME)")
        assert cursor.fetchone() == (datetime(2026, 11, 22, 23, 59, 58, 123456), None)
    assert connection.connection.converter[12] is datetime_or_none  # FIELD_TYPE.DATETIME
