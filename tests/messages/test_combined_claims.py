"""Combined queue claims: pulls of one group queued behind a claim in progress are served
together by one transaction, each under its own lease, and a failed leader strands no one.

The leader is held inside its claim with a real table lock on the trace table, so the pulls
behind it queue up deterministically. A claim writes a trace row only for a message whose row
still holds an earlier delivery's pull (`trace.row_pulls_write`), so the tests' messages are
stored as redelivered ones: the claim's INSERT of the earlier pulls waits for the lock.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import MySQLdb
import pytest
from django.conf import settings
from django.db import connection
from django.db.utils import OperationalError
from django.utils import timezone

from messages.models import Message, MessageTrace, Status, TraceEvent
from messages.services import messages_pull
from messages.services.delivery import queue_claims
from tests.messages.test_concurrency import BROKER, produce

pytestmark = pytest.mark.django_db(transaction=True)

FOLLOWERS = 20


def _raw_connection() -> Any:
    db = settings.DATABASES["default"]
    return MySQLdb.connect(host=db["HOST"] or "127.0.0.1", port=int(db["PORT"] or 3306), user=db["USER"],
                           password=db["PASSWORD"], database=connection.settings_dict["NAME"])


def _queued(topic: str) -> int:
    with queue_claims._lock:
        return len(queue_claims._queued.get((topic, "default"), []))


def _wait_for(condition: Any, what: str, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


class Pulls:
    """Pulls in threads (each with its own database connection), recording what each got."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.got: dict[str, list[int]] = {}
        self.errors: dict[str, BaseException] = {}
        self.threads: list[threading.Thread] = []

    def start(self, consumer: str) -> None:
        def run() -> None:
            try:
                messages = messages_pull(principal=BROKER, topic=self.topic, group="default", consumer=consumer,
                                         max_messages=1, wait_seconds=0)
                self.got[consumer] = [m.id for m in messages]
            except BaseException as exc:  # noqa: BLE001 - asserted by the test
                self.errors[consumer] = exc
            finally:
                connection.close()

        thread = threading.Thread(target=run)
        thread.start()
        self.threads.append(thread)

    def join(self) -> None:
        for thread in self.threads:
            thread.join(timeout=60)
        assert not any(t.is_alive() for t in self.threads), "a pull hung"


def redelivered(topic: str, count: int) -> list[int]:
    """`count` messages whose rows hold the pull of an earlier delivery (by "earlier", first
    attempt), as after a nack with a retry: claiming them writes that pull out."""
    ids = produce(topic, count)
    Message.objects.filter(id__in=ids).update(lease_owner="earlier", attempt=1, pulled_at=timezone.now())
    return ids


def _blocked_on_table(lock_conn: Any, table: str) -> int | None:
    """The connection id of the statement waiting for the locked `table`, if one waits."""
    cursor = lock_conn.cursor()
    cursor.execute("SELECT id FROM information_schema.processlist WHERE state LIKE 'Waiting for table%%'"
                   " AND info LIKE %s", (f"%{table}%",))
    row = cursor.fetchone()
    return row[0] if row else None


def _blocked_on_trace_table(lock_conn: Any) -> int | None:
    """The connection id of the claim waiting for the locked trace table, if one waits."""
    return _blocked_on_table(lock_conn, MessageTrace._meta.db_table)


def _hold_leader(pulls: Pulls, lock_conn: Any) -> int:
    """Start the leader with the trace table locked, wait until it is held inside its claim,
    and queue the followers behind it. Returns the leader's connection id."""
    lock_conn.cursor().execute(f"LOCK TABLES {MessageTrace._meta.db_table} WRITE")
    pulls.start("leader")
    _wait_for(lambda: _blocked_on_trace_table(lock_conn) is not None, "the leader to wait on the lock")
    for i in range(FOLLOWERS):
        pulls.start(f"follower-{i}")
    _wait_for(lambda: _queued(pulls.topic) == FOLLOWERS, "the followers to queue")
    return _blocked_on_trace_table(lock_conn)  # type: ignore[return-value]


def test_pulls_queued_behind_a_claim_are_served_by_one_transaction_each_under_its_own_lease() -> None:
    ids = redelivered("combined", FOLLOWERS + 5)
    pulls = Pulls("combined")
    lock_conn = _raw_connection()
    try:
        _hold_leader(pulls, lock_conn)
        lock_conn.cursor().execute("UNLOCK TABLES")
        pulls.join()
    finally:
        lock_conn.close()

    assert not pulls.errors, pulls.errors
    assert all(len(got) == 1 for got in pulls.got.values()), pulls.got
    delivered = [got[0] for got in pulls.got.values()]
    assert len(set(delivered)) == FOLLOWERS + 1, "a message went to two pulls"
    assert set(delivered) <= set(ids)
    # Each message is leased to the pull that received it, its row holding that pull.
    rows = Message.objects.filter(id__in=delivered).values_list("id", "lease_owner", "attempt", "status", "pulled_at")
    assert {(m, owner, attempt, status) for m, owner, attempt, status, _ in rows} == {
        (got[0], consumer, 2, Status.RUNNING) for consumer, got in pulls.got.items()}
    # The twenty followers were claimed together: one transaction, one claim time.
    follower_times = {at for m, owner, _, _, at in rows if owner.startswith("follower-")}
    assert len(follower_times) == 1, follower_times
    # The earlier delivery's pull of each message went to the trace.
    traces = MessageTrace.objects.filter(message_id__in=delivered, event=TraceEvent.PULLED)
    assert set(traces.values_list("message_id", "actor", "attempt")) == {(m, "earlier", 1) for m in delivered}
    assert Message.objects.filter(topic="combined", status=Status.NEW).count() == 4


def test_a_leader_that_fails_hands_the_queued_pulls_to_a_new_leader() -> None:
    redelivered("failover", FOLLOWERS + 5)
    pulls = Pulls("failover")
    lock_conn = _raw_connection()
    try:
        leader_id = _hold_leader(pulls, lock_conn)
        lock_conn.cursor().execute(f"KILL {int(leader_id)}")  # the leader's connection dies inside its claim
        lock_conn.cursor().execute("UNLOCK TABLES")
        pulls.join()
    finally:
        lock_conn.close()

    assert set(pulls.errors) == {"leader"}
    assert isinstance(pulls.errors["leader"], OperationalError)
    assert sorted(pulls.got) == sorted(f"follower-{i}" for i in range(FOLLOWERS))
    delivered = [got[0] for got in pulls.got.values()]
    assert len(set(delivered)) == FOLLOWERS
    # The leader's claim rolled back with its connection: nothing of it stays RUNNING.
    assert Message.objects.filter(topic="failover", status=Status.RUNNING).count() == FOLLOWERS
    assert Message.objects.filter(topic="failover", status=Status.NEW).count() == 5
