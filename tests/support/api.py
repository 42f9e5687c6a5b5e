"""Small request helpers shared by the API tests (they speak API.md, nothing internal)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tests.conftest import Api, error_of


def produce(api: Api, *items: dict[str, Any]) -> list[dict[str, Any]]:
    response = api.post("/api/v1/messages", {"messages": list(items)})
    assert response.status_code == 201, response.content
    return response.json()["messages"]


def pull(api: Api, topic: str, *, group: str = "default", consumer: str = "c1", max_messages: int = 10,
         wait_seconds: float = 0) -> list[dict[str, Any]]:
    response = api.post("/api/v1/pull", {"topic": topic, "group": group, "consumer": consumer,
                                         "max_messages": max_messages, "wait_seconds": wait_seconds})
    assert response.status_code == 200, response.content
    return response.json()["messages"]


def ack(api: Api, consumer: str, *results: dict[str, Any]) -> list[dict[str, Any]]:
    response = api.post("/api/v1/ack", {"consumer": consumer, "results": list(results)})
    assert response.status_code == 200, response.content
    return response.json()["results"]


def expect_error(response: Any, status: int, code: str, field: str | None = None) -> dict[str, Any]:
    """Assert the API.md error body with this status/code (and details.field if given)."""
    assert response.status_code == status, (response.status_code, response.content[:500])
    error = error_of(response)
    assert error["code"] == code, error
    assert isinstance(error["message"], str) and error["message"], error
    assert isinstance(error["details"], dict), error
    if field is not None:
        assert error["details"].get("field") == field, error
    return error


def parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))
