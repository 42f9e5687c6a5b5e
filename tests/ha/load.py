"""Load for the HA lane: producers and long-polling consumers that behave like careful
clients (retry a 503 or a broken connection, a dedup key per message so a retried produce
cannot duplicate, fail over between brokers), keeping a ledger of what brokers answered."""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx

from tests.faults.harness import Ledger, post_until_answered


@dataclass
class Delivery:
    id: int
    attempt: int
    consumer: str
    lease_expires_at: datetime
    timeout_seconds: int


@dataclass
class HaLedger(Ledger):
    deliveries: list[Delivery] = field(default_factory=list)
    outcomes: list[tuple[int, str, str]] = field(default_factory=list)  # id, consumer, outcome
    produced_at: list[float] = field(default_factory=list)  # when each 201 came back (monotonic)


def clients(urls: list[str], token: str) -> list[httpx.Client]:
    return [httpx.Client(base_url=u, timeout=30, headers={"Authorization": f"Bearer {token}"}) for u in urls]


def produce_until(urls: list[str], token: str, ledger: HaLedger, *, worker: int, size: int, topic: str,
                  stop: threading.Event, deadline: float, pause: float = 0.05) -> None:
    """Produce batches of `size` until `stop`; each batch is retried until answered."""
    pool = clients(urls, token)
    try:
        batch = 0
        while not stop.is_set() and time.monotonic() < deadline:
            keys = [f"w{worker}-b{batch}-m{n}" for n in range(size)]
            body = {"messages": [{"topic": topic, "data": {"key": k}, "dedup_key": k, "retry_count": 50,
                                  "timeout_seconds": 2} for k in keys]}
            response = None
            turn = worker + batch
            while response is None and time.monotonic() < deadline:
                response = post_until_answered(pool[turn % len(pool)], "/api/v1/messages", body, ledger,
                                               min(deadline, time.monotonic() + 2))
                turn += 1  # no answer from this broker within 2 s: the other one
            if response is None or response.status_code != 201:
                return
            with ledger.lock:
                ledger.produced_at.append(time.monotonic())
                for key, item in zip(keys, response.json()["messages"], strict=True):
                    ledger.acknowledged[key] = item["id"]
            batch += 1
            time.sleep(pause)
    finally:
        for client in pool:
            client.close()


def consume_until(url: str, token: str, ledger: HaLedger, *, name: str, topic: str, stop: threading.Event,
                  deadline: float, wait_seconds: float = 5) -> None:
    """Long-poll, record each delivery, ack it SUCCESS (retrying the ack until answered)."""
    with clients([url], token)[0] as client:
        while not stop.is_set() and time.monotonic() < deadline:
            response = post_until_answered(
                client, "/api/v1/pull",
                {"topic": topic, "consumer": name, "max_messages": 20, "wait_seconds": wait_seconds}, ledger,
                min(deadline, time.monotonic() + 2),
            )
            if response is None or response.status_code != 200:
                continue
            messages: list[dict[str, Any]] = response.json()["messages"]
            if not messages:
                continue
            with ledger.lock:
                ledger.delivered.update(m["id"] for m in messages)
                ledger.deliveries += [
                    Delivery(m["id"], m["attempt"], name, datetime.fromisoformat(m["lease_expires_at"]),
                             m["timeout_seconds"]) for m in messages
                ]
            answer = post_until_answered(
                client, "/api/v1/ack",
                {"consumer": name, "results": [{"id": m["id"], "status": "SUCCESS"} for m in messages]},
                ledger, min(deadline, time.monotonic() + 10),
            )
            if answer is not None and answer.status_code == 200:
                with ledger.lock:
                    ledger.outcomes += [(r["id"], name, r["outcome"]) for r in answer.json()["results"]]


def overlapping_deliveries(ledger: HaLedger, grace_seconds: float) -> list[tuple[Delivery, Delivery]]:
    """Pairs of deliveries of one message where the later one was claimed before the earlier
    one's lease ran out (its claim time is its lease's end less the timeout and the grace)."""
    by_id: dict[int, list[Delivery]] = {}
    for delivery in ledger.deliveries:
        by_id.setdefault(delivery.id, []).append(delivery)
    overlaps = []
    for deliveries in by_id.values():
        deliveries.sort(key=lambda d: d.lease_expires_at)
        for earlier, later in itertools.pairwise(deliveries):
            claimed = later.lease_expires_at.timestamp() - later.timeout_seconds - grace_seconds
            if claimed < earlier.lease_expires_at.timestamp() or later.attempt == earlier.attempt:
                overlaps.append((earlier, later))
    return overlaps


def longest_gap(times: list[float], start: float, end: float) -> float:
    """The longest time within [start, end] with no produce answered 201."""
    inside = sorted(t for t in times if start <= t <= end)
    points = [start, *inside, end]
    return max(b - a for a, b in itertools.pairwise(points))
