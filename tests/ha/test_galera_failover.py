"""A Galera node dies under load, the writer first: two broker processes connected through
HAProxy keep every acknowledged message (stored once, ends SUCCESS), never hand one message
to two consumers at once, answer 503 with Retry-After (never 500) while they reconnect, and
answer again within seconds."""

from __future__ import annotations

import threading
import time

import pytest

from tests.faults.harness import drain
from tests.ha import galera
from tests.ha.load import (
    HaLedger,
    consume_until,
    longest_gap,
    overlapping_deliveries,
    produce_until,
)
from tests.support.server import BrokerServer

pytestmark = [pytest.mark.e2e, pytest.mark.galera, pytest.mark.timeout(420)]

GRACE = 1  # MQ_LEASE_GRACE_SECONDS of the brokers
TOPIC = "failover"


def test_it_survives_the_writer_and_another_node_being_killed_under_load() -> None:
    server = BrokerServer("hafail", mysql_port=galera.HAPROXY_PORT,
                          extra_env={"MQ_LEASE_GRACE_SECONDS": str(GRACE)}).setup()
    try:
        urls = [server.start(), server.start()]
        ledger = HaLedger()
        deadline = time.monotonic() + 300
        stop_producing, stop_consuming = threading.Event(), threading.Event()
        producers = [
            threading.Thread(target=produce_until, args=(urls, server.token, ledger),
                             kwargs={"worker": w, "size": 10, "topic": TOPIC, "stop": stop_producing,
                                     "deadline": deadline})
            for w in range(3)
        ]
        consumers = [
            threading.Thread(target=consume_until, args=(urls[n % 2], server.token, ledger),
                             kwargs={"name": f"c{n}", "topic": TOPIC, "stop": stop_consuming, "deadline": deadline})
            for n in range(4)
        ]
        for thread in producers + consumers:
            thread.start()
        wait_for_produces(ledger, 20)
        conflicts_before = {n: galera.conflicts((n,)) for n in (1, 2, 3)}

        kills: list[tuple[int, float]] = []
        first = galera.writer()
        kills.append((first, time.monotonic()))
        galera.kill(first)
        wait_for_produces(ledger, 20)
        after_first = galera.writer()
        galera.restart(first)  # rejoins while the load runs
        wait_for_produces(ledger, 20)

        other = next(n for n in (1, 2, 3) if n not in (first, galera.writer()))
        kills.append((other, time.monotonic()))
        galera.kill(other)  # a node that takes no writes: brokers should not notice
        wait_for_produces(ledger, 20)
        galera.restart(other)
        wait_for_produces(ledger, 20)

        stop_producing.set()
        stopped = time.monotonic()
        for thread in producers:
            thread.join(timeout=60)
        drain(server, TOPIC, ledger, stop_consuming, consumers, deadline)

        # A restarted node counts from its restart: all it counted is this test's.
        restarted = {first, other}
        conflicts = sum(galera.conflicts((n,)) - (0 if n in restarted else conflicts_before[n]) for n in (1, 2, 3))
        gaps = [longest_gap(ledger.produced_at, at, min(at + 30, stopped)) for _, at in kills]
        stored = dict(server.sql("SELECT dedup_key, COUNT(*) FROM mq_message WHERE topic = %s GROUP BY dedup_key", TOPIC))
        statuses = dict(server.sql("SELECT status, COUNT(*) FROM mq_message WHERE topic = %s GROUP BY status", TOPIC))
        print(f"\ngalera failover: killed node{first} (writer; writes then went to node{after_first}) and "
              f"node{other}; acknowledged={len(ledger.acknowledged)} stored={sum(stored.values())} "
              f"deliveries={len(ledger.deliveries)} redelivered={len(ledger.deliveries) - len(ledger.delivered)} "
              f"503s={len(ledger.unavailable)} certification conflicts={conflicts} longest produce gap after each kill={[round(g, 2) for g in gaps]}s")

        assert after_first != first
        # Certification conflicts are reported, not forbidden: at the failback a transaction
        # already running on the backup may still commit while new ones start on the writer,
        # and the hot path runs the loser again. What must hold is below: nothing lost,
        # doubled or held twice.
        assert ledger.unexpected == [], "a broker answered something other than 503 while reconnecting"
        assert all(r.headers.get("Retry-After") for r in ledger.unavailable)
        assert all(r.json()["error"]["code"] == "unavailable" for r in ledger.unavailable)
        assert max(gaps) < 10, "the brokers took longer than seconds to answer again"
        assert all(stored.get(key) == 1 for key in ledger.acknowledged), "an acknowledged message was lost or doubled"
        assert sum(stored.values()) == len(ledger.acknowledged)
        assert statuses == {"SUCCESS": len(ledger.acknowledged)}
        assert set(ledger.delivered) == set(ledger.acknowledged.values())
        assert overlapping_deliveries(ledger, GRACE) == [], "a message was held by two consumers at once"
        acked_by: dict[int, set[str]] = {}
        for message_id, consumer, outcome in ledger.outcomes:
            if outcome == "success":
                acked_by.setdefault(message_id, set()).add(consumer)
        assert all(len(c) == 1 for c in acked_by.values()), "two consumers acknowledged one message SUCCESS"
    finally:
        server.teardown()


def wait_for_produces(ledger: HaLedger, count: int, timeout: float = 60) -> None:
    """Until `count` more produces were answered 201 (the load goes on meanwhile)."""
    target = len(ledger.produced_at) + count
    limit = time.monotonic() + timeout
    while len(ledger.produced_at) < target:
        assert time.monotonic() < limit, "the brokers stopped accepting produces"
        time.sleep(0.1)
