"""WebSocket routes (Channels)."""

from __future__ import annotations

from typing import Any

from channels.auth import AuthMiddlewareStack
from django.urls import path

from messages.consumers import DashboardSocket, MessageSocket, TopicSocket
from registry.consumers import ConsumerWakeupSocket

websocket_urlpatterns: list[Any] = [
    path("ws/v1/consumer", ConsumerWakeupSocket.as_asgi()),
    # The console's live pages authenticate with the session cookie.
    path("ws/console/dashboard", AuthMiddlewareStack(DashboardSocket.as_asgi())),
    path("ws/console/messages/<int:message_id>", AuthMiddlewareStack(MessageSocket.as_asgi())),
    path("ws/console/topics/<str:name>", AuthMiddlewareStack(TopicSocket.as_asgi())),
]
