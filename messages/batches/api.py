"""REST doors for batches: create (messages and their completion callback) and read."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from messages.batches import services
from messages.delivery import validation
from messages.delivery.serializers import ProducedSerializer, ProduceMessageSerializer
from messages.transactions.api import ERRORS
from mqcenter.core.errors import InvalidRequest

BatchSerializer = inline_serializer("Batch", {
    "batch_id": serializers.CharField(), "callback_topic": serializers.CharField(),
    "total": serializers.IntegerField(help_text="members: every stored copy"),
    "pending": serializers.IntegerField(), "success": serializers.IntegerField(), "dead": serializers.IntegerField(),
    "expired": serializers.IntegerField(), "cancelled": serializers.IntegerField(),
    "created_at": serializers.DateTimeField(), "completed_at": serializers.DateTimeField(allow_null=True),
    "callback_message_id": serializers.IntegerField(allow_null=True),
})
BatchCreateSerializer = inline_serializer("BatchCreate", {
    "batch_id": serializers.CharField(required=False, allow_null=True,
                                      help_text="1-64 of letters, digits and _.:-; generated if absent or null"),
    "callback_topic": serializers.CharField(),
    "messages": ProduceMessageSerializer(many=True),
})
BatchCreatedSerializer = inline_serializer("BatchCreated", {
    "batch_id": serializers.CharField(), "messages": ProducedSerializer(many=True),
})


class BatchesView(APIView):
    @extend_schema(operation_id="batch_create", request=BatchCreateSerializer,
                   responses={201: BatchCreatedSerializer, **ERRORS},
                   description="Store messages as one batch; one message goes to callback_topic when all finished.")
    def post(self, request: Request) -> Response:
        body = validation.body_object(request.data)
        unknown = sorted(set(body) - {"batch_id", "callback_topic", "messages"})
        if unknown:
            raise InvalidRequest(f"{unknown[0]} is not a field of a batch.", details={"field": unknown[0]})
        items = validation.produce_items(body)
        batch, results = services.batch_create(principal=request.user, items=items,
                                               callback_topic=body.get("callback_topic"), batch_id=body.get("batch_id"))
        return Response({"batch_id": batch.id, "messages": [r.as_dict() for r in results]},
                        status=status.HTTP_201_CREATED)


class BatchView(APIView):
    @extend_schema(operation_id="batch_detail", responses={200: BatchSerializer, **ERRORS})
    def get(self, request: Request, batch_id: str) -> Response:
        return Response(services.batch_answer(services.batch_get(principal=request.user, batch_id=batch_id)))
