"""The MySQL backend (mqcenter/db_backends/mysql) opens an atomic block's transaction with one
START TRANSACTION and never switches the session's autocommit, with transactions as before:
rolled back whole on an error, locks held until the commit, and hand-managed autocommit
still Django's. Its health check pings only a connection with something to read, and still
replaces a connection the server closed before the next query runs on it."""

from __future__ import annotations

import time

import MySQLdb
import pytest
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from messages.models import Message, Status
from topics.models import Topic

pytestmark = pytest.mark.django_db(transaction=True)


def _status(name: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SHOW SESSION STATUS LIKE %s", [name])
        return int(cursor.fetchone()[1])


def _other_connection() -> MySQLdb.Connection:
    db = settings.DATABASES["default"]
    return MySQLdb.connect(host=db["HOST"], port=int(db["PORT"] or 3306), user=db["USER"],
                           password=db["PASSWORD"], database=connection.settings_dict["NAME"])


def _message(topic: str = "t") -> Message:
    Topic.objects.get_or_create(name=topic)
    now = timezone.now()
    return Message.objects.create(topic=topic, group_name="default", data="{}", status=Status.NEW,
                                  effect_time=now, add_time=now, update_time=now)


def test_a_transaction_costs_one_start_and_no_autocommit_switches():
    connection.ensure_connection()
    sets, begins, commits = _status("Com_set_option"), _status("Com_begin"), _status("Com_commit")
    with transaction.atomic():
        _message()
    assert _status("Com_set_option") == sets
    assert _status("Com_begin") == begins + 1
    assert _status("Com_commit") == commits + 1
    assert connection.get_autocommit() and connection.connection.get_autocommit()


def test_an_error_rolls_back_everything_the_block_wrote():
    with pytest.raises(RuntimeError), transaction.atomic():
        _message("rolled-back")
        raise RuntimeError("boom")
    assert not Message.objects.filter(topic="rolled-back").exists()
    # The next statement is outside any transaction again: it is visible to others at once.
    _message("committed")
    other = _other_connection()
    try:
        cursor = other.cursor()
        cursor.execute("SELECT COUNT(*) FROM mq_message WHERE topic = 'committed'")
        assert cursor.fetchone()[0] == 1
    finally:
        other.close()


def test_row_locks_are_held_until_the_commit():
    message = _message()
    other = _other_connection()
    try:
        cursor = other.cursor()
        with transaction.atomic():
            Message.objects.select_for_update().get(id=message.id)
            Message.objects.filter(id=message.id).update(status=Status.RUNNING)  # a second statement
            with pytest.raises(MySQLdb.OperationalError):
                cursor.execute("SELECT id FROM mq_message WHERE id = %s FOR UPDATE NOWAIT", [message.id])
            # What the block wrote is not visible outside it before the commit.
            cursor.execute("SELECT status FROM mq_message WHERE id = %s", [message.id])
            assert cursor.fetchone()[0] == Status.NEW
        cursor.execute("SELECT id FROM mq_message WHERE id = %s FOR UPDATE NOWAIT", [message.id])
        other.rollback()
    finally:
        other.close()


def test_savepoints_inside_a_block_still_roll_back_alone():
    with transaction.atomic():
        _message("outer")
        with pytest.raises(RuntimeError), transaction.atomic():
            _message("inner")
            raise RuntimeError("inner only")
    assert Message.objects.filter(topic="outer").exists()
    assert not Message.objects.filter(topic="inner").exists()


def test_autocommit_switched_off_by_hand_keeps_the_session_in_a_transaction():
    transaction.set_autocommit(False)
    try:
        assert not connection.connection.get_autocommit()
        _message("by-hand")
        transaction.rollback()
        assert not Message.objects.filter(topic="by-hand").exists()
    finally:
        transaction.set_autocommit(True)
    assert connection.connection.get_autocommit()


def _connection_id() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT CONNECTION_ID()")
        return int(cursor.fetchone()[0])


def test_a_healthy_connection_passes_the_health_check_without_a_ping():
    assert connection.health_check_enabled
    first = _connection_id()
    pings = _status("Com_admin_commands")
    for _ in range(5):
        connection.close_if_unusable_or_obsolete()  # what every request does first
        assert _connection_id() == first
    assert _status("Com_admin_commands") == pings


def test_a_connection_the_server_closed_is_replaced_before_the_next_query():
    killed = _connection_id()
    other = _other_connection()
    try:
        other.cursor().execute(f"KILL {killed}")
    finally:
        other.close()
    deadline = time.monotonic() + 5
    while connection._nothing_to_read() and time.monotonic() < deadline:  # the close is on its way
        time.sleep(0.01)
    connection.close_if_unusable_or_obsolete()  # the next request begins
    assert _connection_id() != killed
