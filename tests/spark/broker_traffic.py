"""Known traffic made through a real broker, for checking the reports' figures.

`make_traffic` drives a `runbroker` process with the SDK (a producer, and a consumer run by
`python -m mqclient run` in its own process) and with plain HTTP calls as a second consumer:
successes, failures with distinct reasons, retries, dead letters, expired leases (timeouts
and retried), released pulls, delayed and waiting messages, messages still running,
cancelled messages, and transactions committed in and after the window or left open. It
returns the report window [since, until); traffic goes on after `until` (an ack, produces),
so a report must rebuild the heap as of `until`.

`cleanup` runs the real cleanup job (archive, Parquet export, purge) against the broker's
database, days later (its `now` moved on, so a topic with that many days of retention
archives what just finished).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mqclient import Producer
from tests.support.server import ROOT, BrokerServer
from tests.support.waiting import wait_until

HTTP_CONSUMER = "ops-http@host-b"
TOPICS = [
    {
        "topic": "orders",
        "retention_days": 7,
        "retry_count": 2,
        "retry_strategy": "fixed",
        "retry_interval_seconds": 0,
        "timeout_seconds": 30,
        "backlog_alarm_threshold": 1000,
        "groups": [{"group": "default"}, {"group": "billing"}],
    },
    {
        "topic": "mail",
        "retention_days": 1,
        "retry_count": 0,
        "timeout_seconds": 30,
        "groups": [{"group": "default"}, {"group": "urgent"}],
    },
    {
        "topic": "audit",
        "retention_days": 30,
        "retry_count": 1,
        "retry_strategy": "fixed",
        "retry_interval_seconds": 3600,
        "timeout_seconds": 600,
        "backlog_alarm_threshold": 5,
        "groups": [{"group": "default"}],
    },
]


def utc_now() -> datetime:
    """The broker's clock (same host), naive UTC as the database stores times."""
    return datetime.now(UTC).replace(tzinfo=None)


def work(n: int) -> float:
    return (n * 7 % 10) / 200  # 0 to 45 ms of handler work, spread over the messages


class Traffic:
    def __init__(self, server: BrokerServer, url: str, tmp: Path) -> None:
        self.server, self.url, self.tmp = server, url, tmp
        self.http = server.client(url)
        self.producer = Producer([url], server.token)

    def close(self) -> None:
        self.http.close()
        self.producer.close()

    # --- HTTP, as API.md says ----------------------------------------------------------

    def call(self, path: str, body: dict[str, Any], status: int = 200) -> dict[str, Any]:
        response = self.http.post(path, json=body)
        assert response.status_code == status, (path, response.status_code, response.text[:500])
        return response.json()

    def produce(self, topic: str, group: str, count: int, **item: Any) -> list[int]:
        items = [{"topic": topic, "group": group, "data": {"n": n}, **item} for n in range(count)]
        return [
            m["id"] for m in self.call("/api/v1/messages", {"messages": items}, 201)["messages"]
        ]

    def prepare(self, topic: str, group: str, count: int) -> str:
        """Half messages of a transaction the broker would check back on in an hour."""
        items = [{"topic": topic, "group": group, "data": {"n": n}} for n in range(count)]
        body = {
            "messages": items,
            "transaction": {"check_url": "http://127.0.0.1:9/check", "check_after_seconds": 3600},
        }
        return str(self.call("/api/v1/messages", body, 201)["transaction_id"])

    def pull(self, topic: str, group: str, count: int) -> list[int]:
        answer = self.call(
            "/api/v1/pull",
            {
                "topic": topic,
                "group": group,
                "consumer": HTTP_CONSUMER,
                "max_messages": count,
                "wait_seconds": 0,
            },
        )
        return [m["id"] for m in answer["messages"]]

    def ack(self, ids: list[int], status: str = "SUCCESS", log: str = "ok") -> list[str]:
        results = [{"id": i, "status": status, "log": log} for i in ids]
        return [
            r["outcome"]
            for r in self.call("/api/v1/ack", {"consumer": HTTP_CONSUMER, "results": results})[
                "results"
            ]
        ]

    def count(self, where: str, *params: Any) -> int:
        return int(self.server.sql(f"SELECT COUNT(*) FROM mq_message WHERE {where}", *params)[0][0])

    def pull_all(self, topic: str, group: str, count: int, timeout: float = 20) -> list[int]:
        """Pull until `count` messages came (retries become deliverable as they are due)."""
        got: list[int] = []
        wait_until(
            lambda: got.extend(self.pull(topic, group, count - len(got))) or len(got) >= count,
            timeout=timeout,
            every=0.1,
            what=f"{count} deliverable messages of {topic}/{group}",
        )
        return got

    # --- the consumer process ----------------------------------------------------------

    def start_sdk_consumer(self) -> subprocess.Popen[bytes]:
        log = (self.tmp / "sdk-consumer.log").open("wb")
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mqclient",
                "run",
                "tests.spark.traffic_consumers",
                "--brokers",
                self.url,
                "--token",
                self.server.token,
                "--wait-seconds",
                "1",
                "--grace",
                "5",
                "--log-level",
                "WARNING",
            ],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "MQ_WEBSOCKET": "0"},
        )


def make_traffic(server: BrokerServer, url: str, tmp: Path) -> dict[str, Any]:
    t = Traffic(server, url, tmp)
    try:
        return _make(t)
    finally:
        t.close()


def _make(t: Traffic) -> dict[str, Any]:
    for topic in TOPICS:
        t.call("/api/v1/topics", topic, 201)
    since = utc_now()

    # orders/default: the SDK consumer's, but the HTTP consumer takes the first 5 itself.
    sdk_items = [
        {"topic": "orders", "group": "default", "data": {"n": n, "work": work(n)}}
        for n in range(25)
    ]
    sdk_items += [
        {"topic": "orders", "group": "default", "data": {"n": n, "fails": ["db timeout"]}}
        for n in range(5)
    ]
    sdk_items += [
        {
            "topic": "orders",
            "group": "default",
            "data": {"n": n, "fails": ["db timeout", "upstream 503"], "work": work(n)},
        }
        for n in range(3)
    ]
    sdk_items += [
        {
            "topic": "orders",
            "group": "default",
            "data": {"n": n, "fails": ["db timeout", "upstream 503", "upstream 503"]},
        }
        for n in range(2)
    ]
    # mail/default: successes, rejects (dead at once) and failures with no retry (dead).
    sdk_items += [
        {"topic": "mail", "group": "default", "data": {"n": n, "work": work(n + 3)}}
        for n in range(10)
    ]
    sdk_items += [
        {"topic": "mail", "group": "default", "data": {"n": n, "reject": "invalid address"}}
        for n in range(3)
    ]
    sdk_items += [
        {"topic": "mail", "group": "default", "data": {"n": n, "fails": ["smtp 451 try later"]}}
        for n in range(2)
    ]
    produced = t.producer.produce_many(sdk_items)
    assert len(produced) == len(sdk_items)
    first = t.pull("orders", "default", 5)
    assert t.ack(first) == ["success"] * 5

    # orders/billing, the HTTP consumer's: 2 released, 2 nacked and retried, 2 expired
    # (a 1 s lease) and retried, the rest acked at once.
    billing = t.produce("orders", "billing", 10)
    short = t.produce("orders", "billing", 2, timeout_seconds=1)
    pulled = t.pull("orders", "billing", 12)
    assert sorted(pulled) == sorted(billing + short)
    t.call("/api/v1/release", {"consumer": HTTP_CONSUMER, "ids": billing[:2]})
    assert (
        t.ack(billing[2:4], "FAIL", "card declined\nat gateway.charge()") == ["retry_scheduled"] * 2
    )
    assert t.ack(billing[4:]) == ["success"] * 6
    wait_until(
        lambda: t.count("id IN (%s, %s) AND status = 'NEW'", *short) == 2,
        timeout=20,
        what="the 1 s leases to expire",
    )
    again = t.pull_all("orders", "billing", 6)
    assert sorted(again) == sorted(billing[:4] + short)
    assert t.ack(again) == ["success"] * 6

    # mail/urgent (no retries): 2 leases expire (TIMEOUT), 2 nacked with no reason (FAIL), 2 acked.
    urgent = t.produce("mail", "urgent", 2, timeout_seconds=1) + t.produce("mail", "urgent", 4)
    assert sorted(t.pull("mail", "urgent", 6)) == sorted(urgent)
    assert t.ack(urgent[2:4], "FAIL", "") == ["failed"] * 2
    assert t.ack(urgent[4:]) == ["success"] * 2

    # audit: 3 held running, 2 nacked into an hour's retry delay, 6 waiting (2 more cancelled),
    # 4 delayed, and 2 committed from a transaction: 8 waiting at `until`.
    held = t.produce("audit", "default", 5)
    assert sorted(t.pull("audit", "default", 5)) == sorted(held)
    assert t.ack(held[3:], "FAIL", "  schema mismatch  ") == ["retry_scheduled"] * 2
    waiting = t.produce("audit", "default", 8)
    assert t.call("/api/v1/messages/cancel", {"ids": waiting[:2]}) == {"count": 2}
    t.produce("audit", "default", 4, delay_seconds=3600)
    # Transactions: one committed in the window, one after it, one left open (PREPARED).
    committed, later, _open = (t.prepare("audit", "default", n) for n in (2, 2, 1))
    t.call(f"/api/v1/transactions/{committed}/commit", {})

    # The SDK consumer works through orders/default and mail/default.
    sdk = t.start_sdk_consumer()
    try:
        wait_until(
            lambda: (
                t.count(
                    "group_name = 'default' AND topic IN ('orders', 'mail') "
                    "AND status IN ('NEW', 'RUNNING')"
                )
                == 0
            ),
            timeout=60,
            every=0.2,
            what="the SDK consumer to finish its messages",
        )
        wait_until(
            lambda: t.count("id IN (%s, %s) AND status = 'TIMEOUT'", *urgent[:2]) == 2,
            timeout=20,
            what="the urgent mail's leases to expire",
        )
    finally:
        sdk.send_signal(signal.SIGTERM)
        sdk.wait(timeout=30)
    assert sdk.returncode == 0, (t.tmp / "sdk-consumer.log").read_text()[-2000:]
    until = utc_now()

    # After the window: a held message finishes, more is produced.
    assert t.ack(held[:1]) == ["success"]
    t.call(f"/api/v1/transactions/{later}/commit", {})
    t.produce("audit", "default", 3)
    t.produce("orders", "billing", 2)
    return {
        "since": since,
        "until": until,
        "held": held,
        "urgent": urgent,
        "billing": billing + short,
    }


def cleanup(server: BrokerServer, archive_dir: Path, days: int, **env: str) -> dict[str, Any]:
    """The cleanup job (archive, export, purge, prune) in its own process on the broker's
    database, `days` and a minute from now. Run it with the broker stopped: its prune would
    take the registry rows of a live broker, days from its last heartbeat."""
    code = (
        "import json, django; django.setup()\n"
        "from datetime import timedelta\n"
        "from django.utils import timezone\n"
        "from messages.archive.services import maintenance_cleanup\n"
        f"print(json.dumps(maintenance_cleanup(now=timezone.now() + timedelta(days={days}, minutes=1))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**server.env, "MQ_ARCHIVE_PARQUET_DIR": str(archive_dir), **env},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
