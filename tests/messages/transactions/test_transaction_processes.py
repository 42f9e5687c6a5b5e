"""A producer process killed between prepare and commit, against a real broker process:
the check-back asks the app's check endpoint (a real local HTTP server) and resolves the
transaction, both ways; nothing is lost or doubled."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.checkserver import CheckServer
from tests.support.server import ROOT, BrokerServer

pytestmark = pytest.mark.e2e

# The app: prepares three messages, records the transaction in its own "database" (the
# check server's answers, through stdout) as committed or not, and dies before committing.
PRODUCER = textwrap.dedent("""
    import sys, time
    from mqclient import Producer
    broker, token, check_url = sys.argv[1:4]
    producer = Producer(brokers=[broker], token=token)
    tx = producer.transaction(check_url=check_url, check_after_seconds=1)
    tx.produce_many([{"topic": "txn", "data": n} for n in range(3)])
    print(tx.transaction_ids[0], flush=True)
    time.sleep(600)  # the local transaction "runs" until the test kills the process
""")


@pytest.fixture(scope="module")
def world() -> Iterator[tuple[BrokerServer, str, CheckServer]]:
    with CheckServer() as checks:
        server = BrokerServer("txn", extra_env={"MQ_TRANSACTION_CHECK_HOSTS": f"127.0.0.1:{checks.port}"}).setup()
        try:
            yield server, server.start(), checks
        finally:
            server.teardown()


def prepared_then_killed(server: BrokerServer, broker: str, checks: CheckServer) -> str:
    proc = subprocess.Popen(
        [sys.executable, "-c", PRODUCER, broker, server.token, checks.url],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )
    try:
        transaction_id = proc.stdout.readline().strip()  # type: ignore[union-attr]
    finally:
        proc.kill()
        proc.wait(timeout=15)
    assert transaction_id, "the producer died before preparing"
    return transaction_id


def resolved(server: BrokerServer, transaction_id: str) -> str:
    """Run the check-back (the beat task's service, via its management command) until the
    transaction is no longer open."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        server.manage("transactions", "check")
        state = server.sql("SELECT state FROM mq_transaction WHERE id=%s", transaction_id)[0][0]
        if state != "open":
            return state
    raise AssertionError("the check-back never resolved the transaction")


def pull_all(server: BrokerServer, broker: str) -> list[dict[str, Any]]:
    with server.client(broker) as client:
        response = client.post("/api/v1/pull", json={"topic": "txn", "consumer": "c1", "max_messages": 50})
    assert response.status_code == 200, response.text
    return response.json()["messages"]


def test_a_killed_producer_whose_local_work_committed_gets_its_messages_delivered_once(world: Any) -> None:
    server, broker, checks = world
    transaction_id = prepared_then_killed(server, broker, checks)
    assert pull_all(server, broker) == [], "prepared messages were delivered before any commit"
    checks.answers[transaction_id] = "commit"

    assert resolved(server, transaction_id) == "committed"

    delivered = pull_all(server, broker)
    assert sorted(m["data"] for m in delivered) == [0, 1, 2]
    stored = server.sql("SELECT COUNT(*) FROM mq_message WHERE topic='txn'")[0][0]
    assert stored == 3
    assert pull_all(server, broker) == []
    server.sql("DELETE FROM mq_message WHERE topic='txn'")


def test_a_killed_producer_whose_local_work_failed_gets_its_messages_removed(world: Any) -> None:
    server, broker, checks = world
    transaction_id = prepared_then_killed(server, broker, checks)
    checks.answers[transaction_id] = "rollback"

    assert resolved(server, transaction_id) == "rolled_back"

    assert server.sql("SELECT COUNT(*) FROM mq_message WHERE topic='txn'")[0][0] == 0
    assert pull_all(server, broker) == []


def test_the_sdk_commits_on_success_and_rolls_back_on_an_exception(world: Any) -> None:
    from mqclient import Producer

    server, broker, checks = world
    with Producer(brokers=[broker], token=server.token) as producer:
        with producer.transaction(check_url=checks.url) as tx:
            tx.produce("txn", "kept")
            assert pull_all(server, broker) == []
        with pytest.raises(RuntimeError), producer.transaction(check_url=checks.url) as failed:
            failed.produce("txn", "dropped")
            raise RuntimeError("the local transaction failed")

    assert [m["data"] for m in pull_all(server, broker)] == ["kept"]
    states = dict(server.sql("SELECT id, state FROM mq_transaction"))
    assert states[tx.transaction_ids[0]] == "committed" and states[failed.transaction_ids[0]] == "rolled_back"


def test_the_sdk_cancels_a_delayed_message_and_surfaces_a_conflict(world: Any) -> None:
    from mqclient import Conflict, Producer

    server, broker, _ = world
    with Producer(brokers=[broker], token=server.token) as producer:
        delayed = producer.produce("cancels", "later", delay=60)
        assert producer.cancel(delayed.id)["status"] == "CANCELLED"
        due = producer.produce("cancels", "now")
        with server.client(broker) as client:
            client.post("/api/v1/pull", json={"topic": "cancels", "consumer": "c1"})
        with pytest.raises(Conflict):
            producer.cancel(due.id)


def waiting_pulls(client: Any) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith("mq_waiting_pulls "):
            return float(line.split()[1])
    return 0.0


def test_a_commit_wakes_a_pull_already_waiting_for_the_messages(world: Any) -> None:
    import threading

    server, broker, checks = world
    got: dict[str, Any] = {}

    def waiting_pull() -> None:
        with server.client(broker) as client:
            response = client.post("/api/v1/pull", json={"topic": "woken", "consumer": "c9", "wait_seconds": 20})
            got["at"], got["messages"] = time.monotonic(), response.json()["messages"]

    with server.client(broker) as client:
        prepared = client.post("/api/v1/messages", json={
            "messages": [{"topic": "woken", "data": "x"}], "transaction": {"check_url": checks.url},
        }).json()
        puller = threading.Thread(target=waiting_pull)
        puller.start()
        # Until the broker reports the pull waiting, so the commit must wake it rather than
        # be found by it.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not waiting_pulls(client):
            time.sleep(0.05)
        assert waiting_pulls(client), "the pull never started waiting"
        committed_at = time.monotonic()
        assert client.post(f"/api/v1/transactions/{prepared['transaction_id']}/commit").status_code == 200
        puller.join(timeout=30)

    assert [m["data"] for m in got["messages"]] == ["x"]
    # The broker's fallback poll is 20 s: only the commit's wake hint delivers this fast.
    assert got["at"] - committed_at < 3.0
