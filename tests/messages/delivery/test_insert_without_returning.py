"""MySQL 8 and TiDB have no `INSERT ... RETURNING`: a produce then inserts row by row and
reads each id back (their auto-increment values in one multi-row statement need not be
consecutive). The same path, forced on this database."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from messages.delivery.produce import ProduceItem, messages_produce
from messages.models import Message
from mqcenter.core.auth import Principal

BROKER = Principal(name="test", scopes=("admin",), biz_ids=None)
pytestmark = pytest.mark.django_db


def test_a_produce_without_returning_answers_each_stored_id(monkeypatch: Any) -> None:
    if connection.vendor != "mysql":
        pytest.skip("the path of MySQL 8 and TiDB (PostgreSQL and SQLite return ids from one insert)")
    monkeypatch.setattr(type(connection.features), "can_return_rows_from_bulk_insert", False)
    items = [ProduceItem(topic="noreturn", data=f'{{"n": {n}}}', key=f"k{n}") for n in range(5)]

    results = messages_produce(principal=BROKER, items=items)

    stored = dict(Message.objects.filter(topic="noreturn").values_list("id", "key"))
    assert [stored[r.id] for r in results] == [f"k{n}" for n in range(5)]
    assert len(set(stored)) == 5
