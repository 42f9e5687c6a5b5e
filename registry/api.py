"""REST doors for the registry: consumer heartbeats, leave, online consumers, brokers."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from messages.delivery import validation
from messages.serializers import ErrorSerializer
from mqcenter.core.errors import InvalidRequest
from registry import services

ERRORS = {code: ErrorSerializer for code in (400, 401, 403, 404, 409, 429, 503)}


class SubscriptionSerializer(serializers.Serializer):
    topic = serializers.CharField(max_length=200)
    group = serializers.CharField(max_length=200, required=False, default="default")


class HeartbeatSerializer(serializers.Serializer):
    consumer = serializers.CharField(max_length=200)
    subscriptions = SubscriptionSerializer(many=True)


class PlacementSerializer(serializers.Serializer):
    topic = serializers.CharField()
    group = serializers.CharField()
    mode = serializers.CharField()
    rank = serializers.IntegerField()
    total = serializers.IntegerField()


class HeartbeatResponseSerializer(serializers.Serializer):
    subscriptions = PlacementSerializer(many=True)
    heartbeat_seconds = serializers.IntegerField()
    brokers = serializers.ListField(child=serializers.CharField())


class ConsumerSerializer(serializers.Serializer):
    consumer = serializers.CharField()
    topic = serializers.CharField()
    group = serializers.CharField()
    host = serializers.CharField()
    rank = serializers.IntegerField()
    total = serializers.IntegerField()
    started_at = serializers.DateTimeField()
    last_heartbeat = serializers.DateTimeField()


class BrokerSerializer(serializers.Serializer):
    node_id = serializers.CharField()
    url = serializers.CharField()
    host = serializers.CharField()
    pid = serializers.IntegerField()
    started_at = serializers.DateTimeField()
    last_heartbeat = serializers.DateTimeField()


def _subscriptions(body: dict[str, Any]) -> list[tuple[str, str]]:
    raw = body.get("subscriptions")
    if not isinstance(raw, list):
        raise InvalidRequest("subscriptions must be a list.", details={"field": "subscriptions"})
    pairs = []
    for index, item in enumerate(raw):
        path = f"subscriptions[{index}]"
        if not isinstance(item, dict):
            raise InvalidRequest(f"{path} must be an object.", details={"field": path})
        pairs.append(
            (validation.name(item.get("topic"), f"{path}.topic"),
             validation.name(item.get("group", "default"), f"{path}.group"))
        )
    return list(dict.fromkeys(pairs))


class ConsumersView(APIView):
    @extend_schema(
        operation_id="registry_heartbeat", request=HeartbeatSerializer,
        responses={200: HeartbeatResponseSerializer, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        body = validation.body_object(request.data)
        consumer = validation.consumer_id(body.get("consumer"))
        placements = services.consumer_heartbeat(
            principal=request.user, consumer=consumer, subscriptions=_subscriptions(body),
            host=consumer.split(":", 1)[0],
        )
        return Response({
            "subscriptions": [p.__dict__ for p in placements],
            "heartbeat_seconds": settings.MQ_HEARTBEAT_SECONDS,
            "brokers": services.broker_urls(),
        })

    @extend_schema(
        operation_id="registry_consumers",
        parameters=[OpenApiParameter("topic", str, required=False), OpenApiParameter("group", str, required=False)],
        responses={200: ConsumerSerializer(many=True), **ERRORS},
    )
    def get(self, request: Request) -> Response:
        topic = request.query_params.get("topic") or None
        group = request.query_params.get("group") or None
        # Another line's topic lists no consumer, as a topic that does not exist.
        return Response(services.consumers_online(principal=request.user, topic=topic, group=group))


class ConsumerView(APIView):
    @extend_schema(operation_id="registry_leave", responses={204: None, **ERRORS})
    def delete(self, request: Request, consumer: str) -> Response:
        services.consumer_leave(principal=request.user, consumer=validation.consumer_id(consumer))
        return Response(status=status.HTTP_204_NO_CONTENT)


class BrokersView(APIView):
    @extend_schema(operation_id="registry_brokers", responses={200: BrokerSerializer(many=True), **ERRORS})
    def get(self, request: Request) -> Response:
        return Response([
            {"node_id": b.node_id, "url": b.url, "host": b.host, "pid": b.pid,
             "started_at": b.started_at, "last_heartbeat": b.last_heartbeat}
            for b in services.brokers_online()
        ])
