"""MariaDB restarts under produce and consume load: 503s meanwhile, nothing lost or doubled."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.faults.harness import Ledger, consume_load, drain, produce_load
from tests.support.private import PrivateMariaDB
from tests.support.server import BrokerServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


@pytest.fixture
def database() -> Iterator[PrivateMariaDB]:
    db = PrivateMariaDB().install()
    db.start()
    try:
        yield db
    finally:
        db.destroy()


def test_it_answers_503_while_the_database_is_down_and_loses_nothing(database: PrivateMariaDB) -> None:
    server = BrokerServer("dbrestart", mysql_port=database.port, extra_env={"MQ_LEASE_GRACE_SECONDS": "1"}).setup()
    try:
        url = server.start()
        ledger = Ledger()
        deadline = time.monotonic() + 150
        stop = threading.Event()
        producers = [
            threading.Thread(target=produce_load, args=([url], server.token, ledger),
                             kwargs={"worker": w, "batches": 40, "size": 10, "topic": "restart", "deadline": deadline})
            for w in range(4)
        ]
        consumers = [
            threading.Thread(target=consume_load, args=(url, server.token, ledger),
                             kwargs={"name": f"c{n}", "topic": "restart", "stop": stop, "deadline": deadline})
            for n in range(2)
        ]
        for thread in producers + consumers:
            thread.start()
        time.sleep(1.5)

        database.stop()
        with httpx.Client(base_url=url, timeout=10, headers={"Authorization": f"Bearer {server.token}"}) as client:
            started = time.monotonic()
            during = client.post("/api/v1/messages", json={"messages": [{"topic": "restart", "data": 0}]})
            answered_in = time.monotonic() - started
            ready = client.get("/readyz")
        time.sleep(2)
        database.start()

        for thread in producers:
            thread.join(timeout=150)
        drain(server, "restart", ledger, stop, consumers, deadline)

        assert during.status_code == 503
        assert during.json()["error"]["code"] == "unavailable"
        assert during.headers["Retry-After"]
        assert answered_in < 8, "a request hung while the database was down"
        assert ready.status_code == 503
        assert ledger.unavailable, "the load never saw the outage"
        assert all(r.headers.get("Retry-After") for r in ledger.unavailable)
        assert ledger.unexpected == []
        assert len(ledger.acknowledged) == 4 * 40 * 10, "a producer gave up"
        stored = dict(server.sql("SELECT dedup_key, COUNT(*) FROM mq_message WHERE topic = 'restart' GROUP BY dedup_key"))
        assert all(stored.get(key) == 1 for key in ledger.acknowledged), "an acknowledged message was lost or doubled"
        statuses = dict(server.sql("SELECT status, COUNT(*) FROM mq_message WHERE topic = 'restart' GROUP BY status"))
        assert statuses == {"SUCCESS": len(ledger.acknowledged)}
        assert set(ledger.delivered) == set(ledger.acknowledged.values())
        print(f"\ndatabase restart: acknowledged={len(ledger.acknowledged)} stored={sum(stored.values())} "
              f"succeeded={statuses['SUCCESS']} lost=0 redelivered={sum(ledger.delivered.values()) - len(ledger.delivered)} "
              f"503s={len(ledger.unavailable)}")
    finally:
        server.teardown()
