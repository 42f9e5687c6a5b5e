"""REST door for per-(topic, group) counts read from the stats buckets."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from messages.serializers import ERRORS
from messages.stats import selectors
from mqcenter.core.auth import IsAdminToken
from mqcenter.core.db import reads_replica


class StatsEntrySerializer(serializers.Serializer):
    topic = serializers.CharField()
    group = serializers.CharField()
    counts = serializers.DictField(child=serializers.IntegerField())
    oldest_deliverable_age_seconds = serializers.FloatField(allow_null=True)


class StatsSerializer(serializers.Serializer):
    stats = StatsEntrySerializer(many=True)


class StatsView(APIView):
    permission_classes = [IsAdminToken]

    @extend_schema(
        operation_id="stats",
        parameters=[OpenApiParameter("topic", str, required=False)],
        responses={200: StatsSerializer, **ERRORS},
    )
    @reads_replica
    def get(self, request: Request) -> Response:
        topic = request.query_params.get("topic") or None
        return Response({"stats": selectors.topic_stats(principal=request.user, topic=topic)})
