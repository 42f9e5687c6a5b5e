"""Subscription filters through two real broker processes: producers racing on both brokers
get every publish copied exactly to the groups whose filter matches, the skips are counted
exactly, and a filter changed through one broker applies to the next publish on the other."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.server import BrokerServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

TAGS = ("created", "paid", "refunded", "shipped")


@pytest.fixture(scope="module")
def brokers() -> Iterator[tuple[BrokerServer, list[str]]]:
    server = BrokerServer("filters").setup()
    try:
        yield server, [server.start(), server.start()]
    finally:
        server.teardown()


def copies(server: BrokerServer, topic: str) -> Counter[tuple[str, str]]:
    return Counter(
        (group, tag) for group, tag in server.sql(
            "SELECT group_name, tag FROM mq_message WHERE topic = %s", topic)
    )


def test_racing_publishes_on_two_brokers_are_copied_by_the_filters_and_counted(brokers: Any) -> None:
    server, urls = brokers
    with server.client(urls[0]) as admin:
        assert admin.post("/api/v1/topics", json={"topic": "fo"}).status_code == 201
        for body in ({"group": "all"}, {"group": "money", "filter": {"tags": ["paid", "refunded"]}},
                     {"group": "eu", "filter": {"expression": "region = 'eu' AND amount >= 50"}}):
            response = admin.post("/api/v1/topics/fo/groups", json=body)
            assert response.status_code == 201, response.text

    def produce(index: int) -> None:
        with server.client(urls[index % 2]) as client:
            for batch in range(10):
                messages = [
                    {"topic": "fo", "data": n, "tag": TAGS[n % 4],
                     "headers": {"region": "eu" if n % 3 == 0 else "us", "amount": str(n)}}
                    for n in range(batch * 10, batch * 10 + 10)
                ]
                response = client.post("/api/v1/messages", json={"messages": messages})
                assert response.status_code == 201, response.text
                entries = response.json()["messages"]
                assert {e["item"] for e in entries} == set(range(10))

    threads = [threading.Thread(target=produce, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # 6 producers x 100 publishes of n = 0..99.
    eu = sum(1 for n in range(100) if n % 3 == 0 and n >= 50)
    found = copies(server, "fo")
    assert sum(c for (g, _), c in found.items() if g == "all") == 600
    assert {t: c for (g, t), c in found.items() if g == "money"} == {"paid": 150, "refunded": 150}
    assert sum(c for (g, _), c in found.items() if g == "eu") == 6 * eu
    with server.client(urls[1]) as client:
        assert client.get("/api/v1/topics/fo/groups/money").json()["filtered_out"] == 300
        assert client.get("/api/v1/topics/fo/groups/eu").json()["filtered_out"] == 600 - 6 * eu
        assert client.get("/api/v1/topics/fo/groups/all").json()["filtered_out"] == 0

    # Changed through broker 1, the next publish through broker 0 follows the new filter.
    with server.client(urls[1]) as admin:
        response = admin.patch("/api/v1/topics/fo/groups/money", json={"filter": {"tags": ["shipped"]}})
        assert response.status_code == 200 and response.json()["filtered_out"] == 0
    with server.client(urls[0]) as client:
        response = client.post("/api/v1/messages", json={"messages": [
            {"topic": "fo", "data": "late", "tag": "shipped"}, {"topic": "fo", "data": "late", "tag": "paid"}]})
        assert response.status_code == 201
        assert [(e["item"], e["group"]) for e in response.json()["messages"]] == [(0, "all"), (0, "money"), (1, "all")]
        assert client.get("/api/v1/topics/fo/groups/money").json()["filtered_out"] == 1


def test_the_command_line_sets_and_removes_a_groups_filter(brokers: Any) -> None:
    import json
    import os
    import subprocess
    import sys

    from tests.support.server import ROOT

    server, urls = brokers

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MQ_")}
        env.update({"MQ_BROKERS": ",".join(urls), "MQ_TOKEN": server.token})
        return subprocess.run([sys.executable, "-m", "mqclient", "groups", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=60)

    with server.client(urls[0]) as admin:
        assert admin.post("/api/v1/topics", json={"topic": "fcli"}).status_code == 201
    made = cli("create", "fcli", "money", "--tags", "paid, refunded")
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["filter"] == {"tags": ["paid", "refunded"]}
    changed = cli("set", "fcli", "money", "--expression", "amount > 10")
    assert json.loads(changed.stdout)["filter"] == {"expression": "amount > 10"}
    bad = cli("set", "fcli", "money", "--expression", "amount >")
    assert bad.returncode == 2 and "position 8" in bad.stderr
    removed = cli("set", "fcli", "money", "--no-filter")
    assert json.loads(removed.stdout)["filter"] is None


def test_the_sdk_reads_receipts_of_filtered_publishes(brokers: Any) -> None:
    from mqclient import Producer
    from mqclient.message import FILTERED

    server, urls = brokers
    with server.client(urls[0]) as admin:
        assert admin.post("/api/v1/topics", json={"topic": "fsdk"}).status_code == 201
        for body in ({"group": "paid", "filter": {"tags": ["paid"]}},
                     {"group": "eu", "filter": {"expression": "region = 'eu'"}}):
            assert admin.post("/api/v1/topics/fsdk/groups", json=body).status_code == 201
    with Producer(brokers=urls, token=server.token) as producer:
        nobody = producer.produce("fsdk", 1, tag="other")
        assert (nobody.status, nobody.ids, nobody.copies) == (FILTERED, [], ())
        receipts = producer.produce_many([
            {"topic": "fsdk", "data": 2, "tag": "paid", "headers": {"region": "eu"}},
            {"topic": "fsdk", "data": 3, "tag": "paid"},
            {"topic": "fsdk", "data": 4, "group": "eu"},
            {"topic": "fsdk", "data": 5},
        ])
        assert [r.groups for r in receipts] == [["eu", "paid"], ["paid"], ["eu"], []]
        assert receipts[3].status == FILTERED
