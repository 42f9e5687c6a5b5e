"""The WebSocket wake-up channel for SDK consumers, against a real broker process."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Coroutine, Iterator
from typing import Any

import httpx
import pytest
import websockets
from websockets.exceptions import WebSocketException

from tests.support.server import BrokerServer

pytestmark = pytest.mark.e2e


def run_async(scenario: Coroutine[Any, Any, Any]) -> Any:
    """asyncio.run on a thread of its own: the test's thread may already run a loop."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = asyncio.run(scenario)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(timeout=30)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


@pytest.fixture(scope="module")
def broker() -> Iterator[tuple[BrokerServer, str]]:
    server = BrokerServer("socket").setup()
    try:
        yield server, server.start()
    finally:
        server.teardown()


def test_it_pushes_a_wake_up_when_a_subscribed_topic_gets_a_message(broker: Any) -> None:
    server, url = broker

    async def scenario() -> dict[str, Any]:
        ws_url = url.replace("http://", "ws://") + "/ws/v1/consumer"
        async with websockets.connect(ws_url, additional_headers={"Authorization": f"Bearer {server.token}"}) as ws:
            await ws.send(json.dumps({"subscribe": [{"topic": "pushed", "group": "g"}]}))
            assert json.loads(await asyncio.wait_for(ws.recv(), 5))["type"] == "subscribed"
            async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {server.token}"}) as client:
                response = await client.post("/api/v1/messages", json={"messages": [
                    {"topic": "pushed", "group": "g", "data": 1}]})
                assert response.status_code == 201
            return json.loads(await asyncio.wait_for(ws.recv(), 5))

    assert run_async(scenario()) == {"type": "wake", "topic": "pushed", "group": "g"}


def test_it_refuses_a_socket_without_a_valid_token(broker: Any) -> None:
    _, url = broker

    async def scenario() -> None:
        ws_url = url.replace("http://", "ws://") + "/ws/v1/consumer"
        async with websockets.connect(ws_url, additional_headers={"Authorization": "Bearer mq_nope_nope"}) as ws:
            await ws.recv()

    with pytest.raises(WebSocketException):
        run_async(scenario())


def test_it_takes_no_token_from_the_query_string_and_one_from_a_subprotocol(broker: Any) -> None:
    server, url = broker
    ws_url = url.replace("http://", "ws://") + "/ws/v1/consumer"

    async def in_query() -> None:
        async with websockets.connect(f"{ws_url}?token={server.token}") as ws:
            await ws.recv()

    async def in_subprotocol() -> str | None:
        async with websockets.connect(ws_url, subprotocols=["mq", f"mq-token.{server.token}"]) as ws:
            await ws.send(json.dumps({"subscribe": [{"topic": "subproto", "group": "g"}]}))
            answer = json.loads(await asyncio.wait_for(ws.recv(), 5))
            return answer["type"] if ws.subprotocol == "mq" else None

    with pytest.raises(WebSocketException):
        run_async(in_query())
    assert run_async(in_subprotocol()) == "subscribed"


def test_it_answers_a_deeply_nested_frame_with_an_error_and_stays_open(broker: Any) -> None:
    server, url = broker

    async def scenario() -> list[dict[str, Any]]:
        ws_url = url.replace("http://", "ws://") + "/ws/v1/consumer"
        async with websockets.connect(ws_url, additional_headers={"Authorization": f"Bearer {server.token}"}) as ws:
            await ws.send("[" * 100_000 + "]" * 100_000)
            refused = json.loads(await asyncio.wait_for(ws.recv(), 5))
            await ws.send(json.dumps({"subscribe": [{"topic": "nested", "group": "g"}]}))
            return [refused, json.loads(await asyncio.wait_for(ws.recv(), 5))]

    refused, subscribed = run_async(scenario())
    assert refused == {"type": "error", "message": "send JSON"}
    assert subscribed["type"] == "subscribed"
