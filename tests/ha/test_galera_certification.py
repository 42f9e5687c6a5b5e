"""A transaction that loses Galera's certification is rolled back at COMMIT with error 1213,
like an InnoDB deadlock victim: the hot path's retry (`retry_on_lock_conflict` around a
`short_transaction`, as every claim and ack runs) runs it again, and its second run wins."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from messages.delivery import sql
from messages.models import Message
from mqcenter.core.db import retry_on_lock_conflict
from tests.ha import galera

pytestmark = [pytest.mark.galera, pytest.mark.django_db(transaction=True)]


def other_node_connection() -> Any:
    """A connection to a node that is not the writer this test's database connection uses."""
    import MySQLdb

    with connection.cursor() as cursor:
        cursor.execute("SELECT @@wsrep_node_name")
        (writer,) = cursor.fetchone()
    other = next(n for n in (1, 2, 3) if f"node{n}" != writer)
    conn = MySQLdb.connect(host="127.0.0.1", port=galera.node_port(other), user="root",
                           db=connection.settings_dict["NAME"])
    conn.autocommit(True)
    return conn


def test_a_claim_that_loses_certification_at_commit_is_run_again() -> None:
    now = timezone.now()
    message = Message.objects.create(topic="cert", group_name="default", data="1", effect_time=now, add_time=now,
                                     update_time=now)
    other = other_node_connection()
    runs: list[str] = []
    conflicts_before = galera.conflicts()

    @retry_on_lock_conflict
    def lease() -> None:
        runs.append("run")
        with sql.short_transaction(), connection.cursor() as cursor:
            cursor.execute("SELECT status FROM mq_message WHERE id = %s FOR UPDATE", [message.id])
            cursor.execute("UPDATE mq_message SET lease_owner = 'here', status = 'RUNNING' WHERE id = %s",
                           [message.id])
            if len(runs) == 1:
                # Another node changes the row first: its lock there knew nothing of ours.
                other.cursor().execute("UPDATE mq_message SET lease_owner = 'there' WHERE id = %s", [message.id])

    try:
        lease()
    finally:
        other.close()

    assert runs == ["run", "run"], "the transaction that lost certification was not run again"
    assert galera.conflicts() > conflicts_before
    message.refresh_from_db()
    assert (message.status, message.lease_owner) == ("RUNNING", "here")
