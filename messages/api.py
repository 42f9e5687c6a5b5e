"""REST doors for one message: read it with its trace, edit, delete and cancel it. Parse,
call one service, render; no rules live here."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from messages import selectors, services
from messages.delivery import validation
from messages.operations import bulk
from messages.serializers import (
    ERRORS,
    MessageDetailSerializer,
    MessageEditSerializer,
    message_full,
    trace_event,
)
from mqcenter.core.auth import IsAdminToken
from mqcenter.core.errors import InvalidRequest


class MessageDetailView(APIView):
    permission_classes = [IsAdminToken]

    @extend_schema(operation_id="message_detail", responses={200: MessageDetailSerializer, **ERRORS})
    def get(self, request: Request, message_id: int) -> Response:
        message, trace = selectors.message_detail(principal=request.user, message_id=message_id)
        return Response({**message_full(message), "trace": [trace_event(e) for e in trace]})

    @extend_schema(
        operation_id="message_edit", request=MessageEditSerializer, responses={200: MessageDetailSerializer, **ERRORS}
    )
    def patch(self, request: Request, message_id: int) -> Response:
        changes = _edit_changes(request.data)
        services.message_edit(principal=request.user, message_id=message_id, changes=changes)
        return self.get(request, message_id)

    @extend_schema(operation_id="message_delete", responses={204: None, **ERRORS})
    def delete(self, request: Request, message_id: int) -> Response:
        services.message_get(principal=request.user, message_id=message_id)
        bulk.messages_delete(principal=request.user, ids=[message_id])
        return Response(status=status.HTTP_204_NO_CONTENT)


class MessageCancelView(APIView):
    permission_classes = [IsAdminToken]
    body_optional = True  # an action: no body, or {}

    @extend_schema(operation_id="message_cancel", request=None, responses={200: MessageDetailSerializer, **ERRORS},
                   description="A NEW (or delayed) or PREPARED message becomes CANCELLED; running or finished: 409.")
    def post(self, request: Request, message_id: int) -> Response:
        validation.no_fields(request.data)
        services.message_cancel(principal=request.user, message_id=message_id)
        return MessageDetailView().get(request, message_id)


def _edit_changes(body: Any) -> dict[str, Any]:
    body = validation.body_object(body)
    allowed = {"data", "status", "effect_time", "retry_remaining"}
    unknown = body.keys() - allowed
    if unknown:
        field = sorted(unknown)[0]
        raise InvalidRequest(f"{field} cannot be edited.", details={"field": field})
    changes: dict[str, Any] = {}
    if "data" in body:
        try:
            changes["data"] = validation.data_text(body["data"])
        except (ValueError, TypeError, RecursionError) as exc:
            raise InvalidRequest("data must be a JSON value.", details={"field": "data"}) from exc
    if "status" in body:
        if body["status"] not in ("NEW", "SUCCESS", "FAIL", "TIMEOUT"):
            raise InvalidRequest("status must be NEW, SUCCESS, FAIL or TIMEOUT.", details={"field": "status"})
        changes["status"] = body["status"]
    if "effect_time" in body:
        changes["effect_time"] = validation.moment(body["effect_time"], "effect_time")
    if "retry_remaining" in body:
        changes["retry_remaining"] = validation.integer(body["retry_remaining"], "retry_remaining", 0, 1000)
    if not changes:
        raise InvalidRequest("Nothing to change.", details={"field": ""})
    return changes
