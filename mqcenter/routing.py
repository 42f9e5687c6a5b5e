"""WebSocket routes (Channels)."""

from __future__ import annotations

from typing import Any

from django.urls import path

from registry.consumers import ConsumerWakeupSocket

websocket_urlpatterns: list[Any] = [
    path("ws/v1/consumer", ConsumerWakeupSocket.as_asgi()),
]
