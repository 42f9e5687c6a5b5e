"""Load for fault tests: producers and consumers that behave like careful clients (retry on
503 and connection errors, dedup keys so a retried produce cannot duplicate) and keep a
ledger of what the broker acknowledged and delivered."""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

TRANSIENT = (httpx.TransportError,)


@dataclass
class Ledger:
    acknowledged: dict[str, int] = field(default_factory=dict)  # dedup_key -> id
    delivered: Counter[int] = field(default_factory=Counter)
    unavailable: list[httpx.Response] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def post_until_answered(client: httpx.Client, path: str, body: Any, ledger: Ledger, deadline: float) -> httpx.Response | None:
    """POST until the broker answers something other than 503 (or the deadline passes)."""
    while time.monotonic() < deadline:
        try:
            response = client.post(path, json=body)
        except TRANSIENT:
            time.sleep(0.2)
            continue
        if response.status_code == 503:
            with ledger.lock:
                ledger.unavailable.append(response)
            time.sleep(0.2)
            continue
        if response.status_code >= 300:
            with ledger.lock:
                ledger.unexpected.append(f"{path} {response.status_code} {response.text[:300]}")
        return response
    return None


def produce_load(urls: list[str], token: str, ledger: Ledger, *, worker: int, batches: int, size: int,
                 topic: str, deadline: float, pause: float = 0.02) -> None:
    clients = [httpx.Client(base_url=u, timeout=10, headers={"Authorization": f"Bearer {token}"}) for u in urls]
    try:
        for batch in range(batches):
            keys = [f"w{worker}-b{batch}-m{n}" for n in range(size)]
            body = {"messages": [
                {"topic": topic, "data": {"key": k}, "dedup_key": k, "retry_count": 20, "timeout_seconds": 2}
                for k in keys
            ]}
            response = None
            while response is None and time.monotonic() < deadline:
                # Fail over across brokers like the SDK does.
                client = clients[(worker + batch + int(time.monotonic() * 5)) % len(clients)]
                response = post_until_answered(client, "/api/v1/messages", body, ledger, min(deadline, time.monotonic() + 2))
            if response is None or response.status_code != 201:
                return
            with ledger.lock:
                for key, item in zip(keys, response.json()["messages"], strict=True):
                    ledger.acknowledged[key] = item["id"]
            time.sleep(pause)
    finally:
        for client in clients:
            client.close()


def consume_load(url: str, token: str, ledger: Ledger, *, name: str, topic: str, stop: threading.Event,
                 deadline: float) -> None:
    with httpx.Client(base_url=url, timeout=10, headers={"Authorization": f"Bearer {token}"}) as client:
        while not stop.is_set() and time.monotonic() < deadline:
            response = post_until_answered(
                client, "/api/v1/pull",
                {"topic": topic, "consumer": name, "max_messages": 50, "wait_seconds": 0.5}, ledger,
                min(deadline, time.monotonic() + 2),
            )
            if response is None or response.status_code != 200:
                continue
            messages = response.json()["messages"]
            if not messages:
                continue
            with ledger.lock:
                ledger.delivered.update(m["id"] for m in messages)
            post_until_answered(
                client, "/api/v1/ack",
                {"consumer": name, "results": [{"id": m["id"], "status": "SUCCESS"} for m in messages]},
                ledger, min(deadline, time.monotonic() + 5),
            )


def drain(server: Any, topic: str, ledger: Ledger, stop: threading.Event, consumers: list[threading.Thread],
          deadline: float) -> None:
    """Let the consumers go on until every acknowledged message of `topic` is SUCCESS (leases
    of answers lost on the way expire and are redelivered), then stop them."""
    while time.monotonic() < deadline:
        done = server.sql("SELECT COUNT(*) FROM mq_message WHERE topic = %s AND status = 'SUCCESS'", topic)[0][0]
        if done >= len(ledger.acknowledged):
            break
        time.sleep(0.5)
    stop.set()
    for thread in consumers:
        thread.join(timeout=30)
