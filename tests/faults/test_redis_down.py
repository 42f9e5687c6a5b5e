"""Redis is not on the durability path: with it down, produce and pull keep working
(long-polls fall back to polling) and wake-ups come back when it returns."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import pytest

from tests.support.private import PrivateRedis
from tests.support.server import BrokerServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]



def wait_for_delivery(client: httpx.Client, topic: str, producer: httpx.Client) -> float:
    """Seconds from produce to the waiting pull's answer."""
    result: dict[str, Any] = {}

    def pull() -> None:
        result["response"] = client.post("/api/v1/pull", json={"topic": topic, "consumer": "c", "wait_seconds": 15})
        result["at"] = time.monotonic()

    thread = threading.Thread(target=pull)
    thread.start()
    time.sleep(0.5)
    sent = time.monotonic()
    response = producer.post("/api/v1/messages", json={"messages": [{"topic": topic, "data": topic}]})
    assert response.status_code == 201, response.text
    thread.join(timeout=20)
    assert result["response"].status_code == 200
    assert [m["data"] for m in result["response"].json()["messages"]] == [topic]
    return result["at"] - sent


def test_it_keeps_producing_and_delivering_while_redis_is_down(redis_server: PrivateRedis) -> None:
    server = BrokerServer("redisdown", extra_env={"REDIS_URL": redis_server.url}).setup()
    try:
        url = server.start()
        with server.client(url) as consumer, server.client(url) as producer:
            assert wait_for_delivery(consumer, "before", producer) < 1.0

            redis_server.stop()
            outage = wait_for_delivery(consumer, "during", producer)
            ready = consumer.get("/readyz")

            redis_server.start()
            time.sleep(3)  # the subscriber reconnects with backoff
            after = wait_for_delivery(consumer, "after", producer)

        assert outage < 3.0, "delivery stalled while Redis was down"
        assert ready.status_code == 503
        assert ready.json()["checks"]["redis"].startswith("down")
        assert ready.json()["checks"]["database"] == "ok"
        assert after < 1.0, "wake-ups did not come back with Redis"
        print(f"\nredis down: delivery {outage:.3f}s during the outage (fallback poll), {after:.3f}s after")
    finally:
        server.teardown()
