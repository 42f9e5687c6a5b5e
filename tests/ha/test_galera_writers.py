"""Claims under Galera's certification: `SELECT ... FOR UPDATE SKIP LOCKED` locks rows only
on the node that runs it, so two brokers writing to two nodes claim the same rows and one of
the two transactions is rolled back at COMMIT (error 1213). The broker runs it again; nothing
is delivered twice and no ack is lost. The same load runs with both brokers on one writer
(HAProxy's single-writer setup) for the end-to-end rate of each topology."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import pytest

from tests.faults.harness import drain
from tests.ha import galera
from tests.ha.load import HaLedger, consume_until, overlapping_deliveries, produce_until
from tests.support.server import BrokerServer, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.galera, pytest.mark.timeout(300)]

GRACE = 1
# The lane's load: 3 producers sending batches of 10 (every 50 ms) to 6 consumers. For the
# figures in docs/deployment.md, MQ_HA_MESSAGES=20000 MQ_HA_BATCH=100 MQ_HA_PAUSE=0 push
# as fast as the brokers take it.
MESSAGES = int(os.environ.get("MQ_HA_MESSAGES", "1500"))
BATCH = int(os.environ.get("MQ_HA_BATCH", "10"))
PAUSE = float(os.environ.get("MQ_HA_PAUSE", "0.05"))


class NodeBrokers(BrokerServer):
    """Broker processes on one database, each through HAProxy or on a node of its own."""

    def __init__(self, name: str) -> None:
        super().__init__(name, mysql_port=galera.HAPROXY_PORT, extra_env={"MQ_LEASE_GRACE_SECONDS": str(GRACE)})
        self.node_of: dict[int, int] = {}

    def start_on(self, node: int | None) -> str:
        """A broker connected to `node` directly, or through HAProxy when None."""
        port = free_port()
        if node is not None:
            self.node_of[port] = node
        return self.start(port)

    def process_env(self, port: int) -> dict[str, str]:
        node = self.node_of.get(port)
        if node is None:
            return self.env
        return {**self.env, "DATABASE_URL": f"mysql://root@127.0.0.1:{galera.node_port(node)}/{self.database}"}


@pytest.fixture(scope="module")
def brokers() -> Iterator[NodeBrokers]:
    server = NodeBrokers("hawriters").setup()
    try:
        yield server
    finally:
        server.teardown()


@pytest.mark.parametrize("topology", ["one_writer", "two_writers"])
def test_claims_and_acks_hold_with_one_writer_and_with_two(brokers: NodeBrokers, topology: str) -> None:
    nodes: list[int | None] = [None, None] if topology == "one_writer" else [1, 2]
    urls = [brokers.start_on(node) for node in nodes]
    topic = f"race-{topology}"
    try:
        conflicts_before = galera.conflicts()
        ledger = HaLedger()
        deadline = time.monotonic() + 240
        stop_producing, stop_consuming = threading.Event(), threading.Event()
        consumers = [
            threading.Thread(target=consume_until, args=(urls[n % 2], brokers.token, ledger),
                             kwargs={"name": f"c{n}", "topic": topic, "stop": stop_consuming,
                                     "deadline": deadline, "wait_seconds": 2})
            for n in range(6)
        ]
        producers = [
            threading.Thread(target=produce_until, args=([urls[w % 2]], brokers.token, ledger),
                             kwargs={"worker": w, "size": BATCH, "topic": topic, "stop": stop_producing,
                                     "deadline": deadline, "pause": PAUSE})
            for w in range(3)
        ]
        started = time.monotonic()
        for thread in consumers + producers:
            thread.start()
        while len(ledger.acknowledged) < MESSAGES and time.monotonic() < deadline:
            time.sleep(0.05)
        stop_producing.set()
        for thread in producers:
            thread.join(timeout=60)
        drain(brokers, topic, ledger, stop_consuming, consumers, deadline)
        elapsed = time.monotonic() - started
        conflicts = galera.conflicts() - conflicts_before

        stored = dict(brokers.sql("SELECT dedup_key, COUNT(*) FROM mq_message WHERE topic = %s GROUP BY dedup_key", topic))
        statuses = dict(brokers.sql("SELECT status, COUNT(*) FROM mq_message WHERE topic = %s GROUP BY status", topic))
        acked_by: dict[int, set[str]] = {}
        for message_id, consumer, outcome in ledger.outcomes:
            if outcome == "success":
                acked_by.setdefault(message_id, set()).add(consumer)
        print(f"\ngalera {topology}: {len(ledger.acknowledged)} messages produced and acknowledged SUCCESS end to end "
              f"in {elapsed:.1f}s = {len(ledger.acknowledged) / elapsed:.0f} msg/s; certification conflicts "
              f"rolled back and retried={conflicts} 503s={len(ledger.unavailable)} "
              f"redelivered={len(ledger.deliveries) - len(ledger.delivered)}")

        assert ledger.unexpected == []
        assert all(r.headers.get("Retry-After") for r in ledger.unavailable)
        assert len(ledger.acknowledged) >= MESSAGES
        assert all(stored.get(key) == 1 for key in ledger.acknowledged), "an acknowledged message was lost or doubled"
        assert statuses == {"SUCCESS": len(ledger.acknowledged)}, "an ack was lost"
        assert overlapping_deliveries(ledger, GRACE) == [], "a message was held by two consumers at once"
        assert all(len(c) == 1 for c in acked_by.values()), "two consumers acknowledged one message SUCCESS"
        assert set(acked_by) == set(ledger.acknowledged.values())
        if topology == "two_writers":
            assert conflicts > 0, "the claims on two nodes never raced: this test proved nothing"
    finally:
        brokers.stop()
