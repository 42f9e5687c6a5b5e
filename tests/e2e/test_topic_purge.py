"""Deleting a large topic through a real broker and a real Celery worker: the purge runs as a
job in the background, the name is refused to another business line until it is done, and
the line that then creates the name sees nothing of the old topic."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.support.server import BrokerServer, start_celery_worker, stop_processes
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

MESSAGES = 2500  # more than one purge batch (1,000) several times over


@pytest.fixture(scope="module")
def broker() -> Iterator[tuple[BrokerServer, str]]:
    server = BrokerServer("purge", extra_env={"MQ_TOPIC_PURGE_SETTLE_SECONDS": "2"}).setup()
    worker = start_celery_worker(server.env)
    try:
        yield server, server.start()
    finally:
        stop_processes([worker])
        server.teardown()


def test_it_purges_a_large_deleted_topic_in_the_background_and_refuses_its_name_meanwhile(
    broker: tuple[BrokerServer, str],
) -> None:
    server, url = broker
    shop = server.manage("createtoken", "--biz", "shop", "--scope", "admin").strip()
    other = server.manage("createtoken", "--biz", "other", "--scope", "admin").strip()
    with server.client(url, shop) as owner, server.client(url, other) as thief:
        for start in range(0, MESSAGES, 500):
            produced = owner.post(
                "/api/v1/messages",
                json={
                    "messages": [
                        {"topic": "ledger", "group": "g", "data": {"secret": n}}
                        for n in range(start, start + 500)
                    ]
                },
            )
            assert produced.status_code == 201, produced.text
        acked = 0
        while acked < MESSAGES:
            pulled = owner.post(
                "/api/v1/pull",
                json={"topic": "ledger", "group": "g", "consumer": "c1", "max_messages": 500},
            ).json()["messages"]
            answer = owner.post(
                "/api/v1/ack",
                json={
                    "consumer": "c1",
                    "results": [{"id": m["id"], "status": "SUCCESS"} for m in pulled],
                },
            )
            assert answer.status_code == 200, answer.text
            acked += len(pulled)
        old_ids = [row[0] for row in server.sql("SELECT id FROM mq_message WHERE topic = 'ledger'")]
        assert len(old_ids) == MESSAGES

        deleted = owner.delete("/api/v1/topics/ledger")
        assert deleted.status_code == 202, deleted.text
        job = deleted.json()["job"]
        assert owner.get("/api/v1/topics/ledger").status_code == 404
        taken = thief.post(
            "/api/v1/messages", json={"messages": [{"topic": "ledger", "data": "mine"}]}
        )
        assert taken.status_code in (201, 409), taken.text
        if taken.status_code == 409:  # the purge is still under way: the name is not free yet
            assert "being deleted" in taken.json()["error"]["message"]

        def done() -> bool:
            return bool(owner.get(f"/api/v1/jobs/{job}").json()["state"] == "done")

        wait_until(done, timeout=60, every=0.2, what="the purge job to finish")
        assert owner.get(f"/api/v1/jobs/{job}").json()["processed"] == MESSAGES
        created = thief.post(
            "/api/v1/messages", json={"messages": [{"topic": "ledger", "data": "mine"}]}
        )
        assert created.status_code == 201, created.text
        mine = created.json()["messages"][0]["id"]
        listed = thief.get("/api/v1/messages", params={"topic": "ledger"}).json()["messages"]
        assert [m["id"] for m in listed] == [mine]
        for message_id in (old_ids[0], old_ids[-1]):
            assert thief.get(f"/api/v1/messages/{message_id}").status_code == 404
        assert server.sql("SELECT COUNT(*) FROM mq_message WHERE topic = 'ledger'") == [(1,)]
        assert server.sql(
            f"SELECT COUNT(*) FROM mq_message_trace WHERE message_id IN ({old_ids[0]}, {old_ids[-1]})"
        ) == [(0,)]


def test_a_topic_is_refused_to_another_line_while_its_purge_job_runs(
    broker: tuple[BrokerServer, str],
) -> None:
    server, url = broker
    shop = server.manage("createtoken", "--biz", "shop", "--scope", "admin").strip()
    other = server.manage("createtoken", "--biz", "other", "--scope", "admin").strip()
    with server.client(url, shop) as owner, server.client(url, other) as thief:
        assert (
            owner.post(
                "/api/v1/messages", json={"messages": [{"topic": "brief", "group": "g", "data": 1}]}
            ).status_code
            == 201
        )
        [message] = owner.post(
            "/api/v1/pull", json={"topic": "brief", "group": "g", "consumer": "c"}
        ).json()["messages"]
        owner.post(
            "/api/v1/ack",
            json={"consumer": "c", "results": [{"id": message["id"], "status": "SUCCESS"}]},
        )
        assert owner.delete("/api/v1/topics/brief").status_code == 204
        # The row holds the name for MQ_TOPIC_PURGE_SETTLE_SECONDS: the worker frees it then.
        refused = thief.post("/api/v1/topics", json={"topic": "brief"})
        assert (
            refused.status_code == 409 and "being deleted" in refused.json()["error"]["message"]
        ), refused.text

        def created() -> bool:
            response = thief.post("/api/v1/topics", json={"topic": "brief"})
            assert response.status_code in (201, 409), response.text
            return bool(response.status_code == 201)

        wait_until(created, timeout=30, every=0.2, what="the name to be free")
        with httpx.Client(base_url=url, timeout=10) as anonymous:
            assert anonymous.get("/api/v1/topics/brief").status_code == 401
        assert thief.get("/api/v1/messages", params={"topic": "brief"}).json()["messages"] == []
