"""The edges of a group's life through two real broker processes: a group deleted while it
holds a leased message and a dead letter, then re-created under its name; a group
subscribed between a transactional publish's prepare and its commit."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.server import BrokerServer
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def brokers() -> Iterator[tuple[BrokerServer, list[str]]]:
    server = BrokerServer("edges", extra_env={"MQ_LEASE_GRACE_SECONDS": "0",
                                                   "MQ_TRANSACTION_CHECK_HOSTS": "127.0.0.1:9"}).setup()
    try:
        yield server, [server.start(), server.start()]
    finally:
        server.teardown()


def test_a_re_created_group_sees_nothing_of_the_deleted_one(brokers):
    server, (one, two) = brokers
    a, b = server.client(one), server.client(two)
    # Leases end after 1 s and a lease that ends is retried at once (fixed 0 s).
    assert a.post("/api/v1/topics", json={
        "topic": "edges", "timeout_seconds": 1, "retry_strategy": "fixed", "retry_interval_seconds": 0,
        "groups": [{"group": "g"}]}).status_code == 201, "topic"
    produced = a.post("/api/v1/messages", json={"messages": [
        {"topic": "edges", "data": n, "retry_count": 0 if n == 1 else 3} for n in range(2)]})
    assert produced.status_code == 201, produced.text
    held = a.post("/api/v1/pull", json={"topic": "edges", "group": "g", "consumer": "c1", "max_messages": 2,
                                        "wait_seconds": 0}).json()["messages"]
    leased, doomed = sorted(held, key=lambda m: m["data"])
    assert a.post("/api/v1/ack", json={"consumer": "c1", "results": [
        {"id": doomed["id"], "status": "FAIL"}]}).json()["results"][0]["outcome"] == "failed"

    assert b.delete("/api/v1/topics/edges/groups/g").status_code == 204
    rows = dict(server.sql("SELECT id, status FROM mq_message WHERE topic = 'edges'"))
    assert rows == {leased["id"]: "CANCELLED", doomed["id"]: "CANCELLED"}
    events = server.sql("SELECT message_id, event FROM mq_message_trace WHERE event = 'cancelled'")
    assert sorted(events) == sorted([(leased["id"], "cancelled"), (doomed["id"], "cancelled")])

    created = b.post("/api/v1/topics/edges/groups", json={"group": "g", "start": "latest"})
    assert created.status_code == 201, created.text
    status = created.json()
    assert (status["backlog"], status["in_flight"], status["dead"]) == (0, 0, 0)
    # Past the old lease's end, with both brokers recovering leases every 0.2 s, a pull on
    # either broker gets the one message published after the re-creation, never the old one.
    assert a.post("/api/v1/messages", json={"messages": [{"topic": "edges", "data": 9}]}).status_code == 201
    wait_until(lambda: server.sql("SELECT COUNT(*) FROM mq_message WHERE status = 'RUNNING'") == [(0,)],
               timeout=10, what="no lease left")
    got = []
    for client in (a, b):
        answer = client.post("/api/v1/pull", json={"topic": "edges", "group": "g", "consumer": "c2",
                                                   "max_messages": 10, "wait_seconds": 2}).json()["messages"]
        for m in answer:
            assert client.post("/api/v1/ack", json={"consumer": "c2", "results": [
                {"id": m["id"], "status": "SUCCESS"}]}).json()["results"][0]["outcome"] == "success"
        got += answer
    assert [m["data"] for m in got] == [9]
    assert dict(server.sql("SELECT id, status FROM mq_message WHERE id IN (%s, %s)", leased["id"], doomed["id"])) == {
        leased["id"]: "CANCELLED", doomed["id"]: "CANCELLED"}


def test_a_transactional_publish_reaches_the_groups_subscribed_at_its_commit(brokers):
    server, (one, two) = brokers
    a, b = server.client(one), server.client(two)
    assert a.post("/api/v1/topics", json={"topic": "txn", "groups": [{"group": "g1"}]}).status_code == 201
    prepared = a.post("/api/v1/messages", json={
        "messages": [{"topic": "txn", "data": n} for n in range(3)],
        "transaction": {"check_url": "http://127.0.0.1:9/check", "check_after_seconds": 3600}})
    assert prepared.status_code == 201, prepared.text
    assert b.post("/api/v1/topics/txn/groups", json={"group": "g2", "start": "earliest"}).status_code == 201
    assert b.post("/api/v1/topics/txn/groups", json={"group": "g3", "start": "latest"}).status_code == 201
    # A pull of g2 waits on broker two; the commit on broker one wakes it.
    with b.stream("POST", "/api/v1/pull", json={"topic": "txn", "group": "g2", "consumer": "w", "max_messages": 10,
                                                 "wait_seconds": 20}) as waiting:
        wait_until(lambda: server.waiting_pulls() >= 1, timeout=10, what="the pull to wait")
        committed = a.post(f"/api/v1/transactions/{prepared.json()['transaction_id']}/commit", json={})
        assert committed.status_code == 200, committed.text
        waiting.read()
        woken = waiting.json()["messages"]
    got = {"g2": [m["data"] for m in woken]}
    for group in ("g1", "g2", "g3"):
        answer = a.post("/api/v1/pull", json={"topic": "txn", "group": group, "consumer": "c", "max_messages": 10,
                                               "wait_seconds": 0}).json()["messages"]
        got[group] = sorted(got.get(group, []) + [m["data"] for m in answer])
    assert got == {"g1": [0, 1, 2], "g2": [0, 1, 2], "g3": [0, 1, 2]}
    assert server.sql("SELECT COUNT(*) FROM mq_message WHERE topic = 'txn'") == [(9,)]
