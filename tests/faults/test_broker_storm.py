"""Three broker processes killed at random while producers and long-polling consumers run:
every acknowledged message is stored once and ends SUCCESS."""

from __future__ import annotations

import os
import random
import threading
import time

import pytest

from tests.faults.harness import Ledger, consume_load, drain, produce_load
from tests.support.server import BrokerServer, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

# How long brokers are killed and restarted; MQ_STORM_SECONDS=60 for a longer storm.
STORM_SECONDS = float(os.environ.get("MQ_STORM_SECONDS", "10"))


def test_three_brokers_killed_at_random_lose_and_double_nothing() -> None:
    server = BrokerServer("storm", extra_env={"MQ_LEASE_GRACE_SECONDS": "1", "MQ_LEASE_RECOVERY_SECONDS": "0.5"}).setup()
    rng = random.Random(int(os.environ.get("MQ_STORM_SEED", "0")) or None)
    try:
        ports = [free_port() for _ in range(3)]
        urls = [server.start(port) for port in ports]
        ledger = Ledger()
        deadline = time.monotonic() + STORM_SECONDS + 150
        stop = threading.Event()
        producers = [
            threading.Thread(target=produce_load, args=(urls, server.token, ledger),
                             kwargs={"worker": w, "batches": 10_000, "size": 10, "topic": "storm",
                                     "deadline": time.monotonic() + STORM_SECONDS, "pause": 0.01})
            for w in range(3)
        ]
        consumers = [
            threading.Thread(target=consume_load, args=(urls[n % 3], server.token, ledger),
                             kwargs={"name": f"c{n}", "topic": "storm", "stop": stop, "deadline": deadline})
            for n in range(4)
        ]
        for thread in producers + consumers:
            thread.start()

        kills = 0
        storm_ends = time.monotonic() + STORM_SECONDS
        while time.monotonic() < storm_ends:
            victim = rng.choice(urls)
            server.kill(victim)  # SIGKILL: no shutdown, no lease handed back
            kills += 1
            server.start(int(victim.rsplit(":", 1)[1]))  # back on its port, as a supervisor restarts it
            time.sleep(rng.uniform(0.2, 1.0))  # the storm's pace, not a synchronisation

        for thread in producers:
            thread.join(timeout=60)
        drain(server, "storm", ledger, stop, consumers, deadline)

        assert kills >= 2  # a restart takes a few seconds: MQ_STORM_SECONDS=60 for a longer storm
        assert ledger.unexpected == []
        assert len(ledger.acknowledged) > 100, "the producers barely ran"
        stored = dict(server.sql("SELECT dedup_key, COUNT(*) FROM mq_message WHERE topic = 'storm' GROUP BY dedup_key"))
        assert all(stored.get(key) == 1 for key in ledger.acknowledged), "an acknowledged message was lost or doubled"
        # A batch a killed broker committed but never answered is stored with no ledger entry:
        # its producer's retry (same dedup keys) answered it, unless the producer stopped first.
        statuses = dict(server.sql(
            "SELECT status, COUNT(*) FROM mq_message WHERE topic = 'storm' AND dedup_key IN ({})".format(
                ",".join(["%s"] * len(ledger.acknowledged))), *ledger.acknowledged))
        assert statuses == {"SUCCESS": len(ledger.acknowledged)}
        # Each finished by the ack of a consumer that held its lease (the row keeps the holder).
        holders = dict(server.sql(
            "SELECT lease_owner, COUNT(*) FROM mq_message WHERE topic = 'storm' AND dedup_key IN ({}) "
            "GROUP BY lease_owner".format(",".join(["%s"] * len(ledger.acknowledged))), *ledger.acknowledged))
        assert set(holders) <= {f"c{n}" for n in range(4)} and sum(holders.values()) == len(ledger.acknowledged)
        print(f"\nbroker storm: {kills} kills in {STORM_SECONDS:.0f} s, acknowledged={len(ledger.acknowledged)} "
              f"redelivered={sum(ledger.delivered.values()) - len(ledger.delivered)}")
    finally:
        server.teardown()
