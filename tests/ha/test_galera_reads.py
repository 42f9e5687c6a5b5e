"""DATABASE_READ_URL at a Galera node that takes no writes: the stats and the console's list
read that node, produces and the message page still go through HAProxy to the writer."""

from __future__ import annotations

import time

import pytest

from tests.ha import galera
from tests.support.server import BrokerServer

pytestmark = [pytest.mark.e2e, pytest.mark.galera, pytest.mark.timeout(180)]


def selects(node: int) -> int:
    """SELECTs the node ran so far (read by SHOW, which is not one)."""
    import MySQLdb

    conn = MySQLdb.connect(host="127.0.0.1", port=galera.node_port(node), user="root", connect_timeout=3)
    try:
        cur = conn.cursor()
        cur.execute("SHOW GLOBAL STATUS LIKE 'Com_select'")
        return int(cur.fetchone()[1])
    finally:
        conn.close()


def test_stats_read_another_node_and_writes_stay_on_the_writer() -> None:
    writer = galera.writer()
    reader = next(n for n in (1, 2, 3) if n != writer)
    server = BrokerServer("hareads", mysql_port=galera.HAPROXY_PORT)
    server.env["DATABASE_READ_URL"] = f"mysql://root@127.0.0.1:{galera.node_port(reader)}/{server.database}"
    server.setup()
    try:
        url = server.start()
        with server.client(url) as client:
            produced = client.post("/api/v1/messages", json={"messages": [{"topic": "reads", "data": n} for n in range(5)]})
            assert produced.status_code == 201, produced.text

            before = selects(reader)
            deadline = time.monotonic() + 10
            counts: dict[str, int] = {}
            while time.monotonic() < deadline:  # the reader applies the writer's commits a little later
                stats = client.get("/api/v1/stats", params={"topic": "reads"})
                assert stats.status_code == 200, stats.text
                rows = stats.json()["stats"]
                counts = rows[0]["counts"] if rows else {}
                if counts.get("NEW") == 5:
                    break
                time.sleep(0.1)
            read_there = selects(reader) - before

            writer_before = selects(writer)
            message_id = produced.json()["messages"][0]["id"]
            detail = client.get(f"/api/v1/messages/{message_id}")
            on_writer = selects(writer) - writer_before

        assert counts.get("NEW") == 5
        assert read_there > 0, "the stats did not read the read node"
        assert detail.status_code == 200, detail.text
        assert on_writer > 0, "the message's detail did not read the writer"
    finally:
        server.teardown()
