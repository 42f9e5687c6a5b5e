"""A batch's completion callback through two real broker processes: the batch's last two
members acked at the same instant, one on each broker, produce exactly one callback — never
two, never none — round after round."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.server import BrokerServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

ROUNDS = 8


@pytest.fixture(scope="module")
def brokers() -> Iterator[tuple[BrokerServer, list[str]]]:
    server = BrokerServer("batches").setup()
    try:
        yield server, [server.start(), server.start()]
    finally:
        server.teardown()


def test_the_last_two_acked_at_once_on_two_brokers_make_one_callback(brokers: Any) -> None:
    server, urls = brokers
    clients = [server.client(url) for url in urls]
    try:
        for name in ("work", "work.done"):
            assert clients[0].post("/api/v1/topics", json={"topic": name}).status_code == 201
        for round_ in range(ROUNDS):
            batch_id = f"race-{round_}"
            response = clients[round_ % 2].post("/api/v1/batches", json={
                "batch_id": batch_id, "callback_topic": "work.done",
                "messages": [{"topic": "work", "data": n, "group": "g"} for n in range(4)]})
            assert response.status_code == 201, response.text
            taken = []
            for index in (0, 1):  # one consumer per broker, two messages each
                answer = clients[index].post("/api/v1/pull", json={
                    "topic": "work", "group": "g", "consumer": f"c{index}", "max_messages": 2}).json()
                taken.append(answer["messages"])
            assert sorted(m["data"] for held in taken for m in held) == [0, 1, 2, 3]
            for index in (0, 1):  # the first of each consumer's two, one after the other
                ack = clients[index].post("/api/v1/ack", json={
                    "consumer": f"c{index}", "results": [{"id": taken[index][0]["id"], "status": "SUCCESS"}]})
                assert ack.json()["results"][0]["outcome"] == "success"
            start = threading.Barrier(2)
            outcomes: list[str] = []

            def last(index: int) -> None:
                start.wait()
                ack = clients[index].post("/api/v1/ack", json={
                    "consumer": f"c{index}", "results": [{"id": taken[index][1]["id"], "status": "SUCCESS"}]})
                outcomes.append(ack.json()["results"][0]["outcome"])

            threads = [threading.Thread(target=last, args=(i,)) for i in (0, 1)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert outcomes == ["success", "success"]
            rows = server.sql("SELECT data, tag FROM mq_message WHERE topic = 'work.done' AND msg_key = %s", batch_id)
            assert len(rows) == 1, f"round {round_}: {len(rows)} callbacks"
            assert json.loads(rows[0][0]) == {"batch_id": batch_id, "total": 4, "success": 4, "dead": 0,
                                              "expired": 0, "cancelled": 0}
            assert rows[0][1] == "batch.completed"
            status = clients[1].get(f"/api/v1/batches/{batch_id}").json()
            assert status["pending"] == 0 and status["completed_at"] is not None
    finally:
        for client in clients:
            client.close()


def test_the_callback_wakes_a_waiting_pull_on_the_other_broker(brokers: Any) -> None:
    """The completion is stored in the ack's transaction and wakes the pulls of the callback
    topic (after that commits), so a pull already waiting there answers at once, not after
    its fallback poll (20 s)."""
    import time

    from tests.support.waiting import wait_until

    server, urls = brokers
    clients = [server.client(url) for url in urls]
    try:
        for name in ("wake", "wake.done"):
            assert clients[0].post("/api/v1/topics", json={"topic": name}).status_code == 201
        assert clients[0].post("/api/v1/topics/wake.done/groups", json={"group": "cb"}).status_code == 201
        response = clients[0].post("/api/v1/batches", json={
            "batch_id": "wake-1", "callback_topic": "wake.done",
            "messages": [{"topic": "wake", "data": 1, "group": "g"}]})
        assert response.status_code == 201, response.text
        [taken] = clients[0].post("/api/v1/pull", json={"topic": "wake", "group": "g", "consumer": "c0"}).json()[
            "messages"]
        result: dict[str, Any] = {}

        def wait_for_callback() -> None:
            started = time.monotonic()
            answer = clients[1].post("/api/v1/pull", json={"topic": "wake.done", "group": "cb", "consumer": "w",
                                                           "wait_seconds": 25}).json()
            result["messages"], result["seconds"] = answer["messages"], time.monotonic() - started

        waiting_before = server.waiting_pulls()
        thread = threading.Thread(target=wait_for_callback)
        thread.start()
        wait_until(lambda: server.waiting_pulls() > waiting_before, timeout=20, what="the pull to wait")
        acked = time.monotonic()
        clients[0].post("/api/v1/ack", json={"consumer": "c0", "results": [{"id": taken["id"], "status": "SUCCESS"}]})
        thread.join(timeout=40)
        assert [m["tag"] for m in result["messages"]] == ["batch.completed"]
        assert time.monotonic() - acked < 10, "woken by the ack's commit, not by the 20 s fallback poll"
    finally:
        for client in clients:
            client.close()


def test_the_sdk_creates_a_batch_and_reads_its_progress(brokers: Any) -> None:
    from mqclient import Producer

    server, urls = brokers
    with Producer(brokers=urls, token=server.token) as producer:
        batch_id, receipts = producer.batch([{"topic": "sdkb", "data": n, "group": "g"} for n in range(3)],
                                            callback_topic="sdkb.done")
        assert len(receipts) == 3 and all(r.id for r in receipts)
        status = producer.batch_status(batch_id)
        assert (status["total"], status["pending"], status["completed_at"]) == (3, 3, None)
        with server.client(urls[1]) as client:
            taken = client.post("/api/v1/pull", json={"topic": "sdkb", "group": "g", "consumer": "c",
                                                      "max_messages": 3}).json()["messages"]
            client.post("/api/v1/ack", json={"consumer": "c", "results": [
                {"id": m["id"], "status": "SUCCESS"} for m in taken]})
        status = producer.batch_status(batch_id)
        assert status["pending"] == 0 and status["success"] == 3 and status["callback_message_id"]
