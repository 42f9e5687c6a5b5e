"""REST doors for operations on many messages: redrive, requeue, delete and cancel by ids or
filter, move to another topic or group, and the progress of a bulk job. Parse, call one
service, render."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from messages.delivery import validation
from messages.filters import MessageFilter
from messages.operations import bulk
from messages.operations.move import messages_move
from messages.operations.serializers import (
    BulkRequestSerializer,
    BulkResponseSerializer,
    JobSerializer,
    MoveRequestSerializer,
    MoveResponseSerializer,
)
from messages.serializers import ERRORS
from mqcenter.core.auth import IsAdminToken
from mqcenter.core.errors import InvalidRequest


class RedriveView(APIView):
    permission_classes = [IsAdminToken]
    dead_only = True

    @extend_schema(
        operation_id="messages_redrive",
        request=BulkRequestSerializer,
        responses={200: BulkResponseSerializer, 202: BulkResponseSerializer, **ERRORS},
        description="Dead letters back to NEW with retries reset; a job id for large filters.",
    )
    def post(self, request: Request) -> Response:
        ids, flt = bulk_target(request.data)
        result = bulk.messages_requeue(principal=request.user, ids=ids, filter=flt, dead_only=self.dead_only)
        return Response(result, status=status.HTTP_202_ACCEPTED if "job" in result else status.HTTP_200_OK)


class RequeueView(RedriveView):
    dead_only = False

    @extend_schema(
        operation_id="messages_requeue",
        request=BulkRequestSerializer,
        responses={200: BulkResponseSerializer, 202: BulkResponseSerializer, **ERRORS},
        description="Any message that is not running back to NEW now (extension).",
    )
    def post(self, request: Request) -> Response:
        return super().post(request)


class BulkDeleteView(APIView):
    permission_classes = [IsAdminToken]

    @extend_schema(
        operation_id="messages_delete",
        request=BulkRequestSerializer,
        responses={200: BulkResponseSerializer, 202: BulkResponseSerializer, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        ids, flt = bulk_target(request.data)
        result = bulk.messages_delete(principal=request.user, ids=ids, filter=flt)
        return Response(result, status=status.HTTP_202_ACCEPTED if "job" in result else status.HTTP_200_OK)


class BulkCancelView(APIView):
    permission_classes = [IsAdminToken]

    @extend_schema(
        operation_id="messages_cancel",
        request=BulkRequestSerializer,
        responses={200: BulkResponseSerializer, 202: BulkResponseSerializer, **ERRORS},
        description="Cancel the NEW or PREPARED messages among ids or a filter; a job id for large filters.",
    )
    def post(self, request: Request) -> Response:
        ids, flt = bulk_target(request.data)
        result = bulk.messages_cancel(principal=request.user, ids=ids, filter=flt)
        return Response(result, status=status.HTTP_202_ACCEPTED if "job" in result else status.HTTP_200_OK)


class JobView(APIView):
    permission_classes = [IsAdminToken]

    @extend_schema(operation_id="job_detail", responses={200: JobSerializer, **ERRORS})
    def get(self, request: Request, job_id: int) -> Response:
        job = bulk.bulk_job_get(principal=request.user, job_id=job_id)
        return Response({
            "id": job.id, "kind": job.kind, "state": job.state, "total": job.total,
            "processed": job.processed, "error": job.error, "filter": job.filter,
            "created_at": job.created_at, "finished_at": job.finished_at,
        })


def bulk_target(
    body: Any, *, filter_class: type[MessageFilter] = MessageFilter, extra: frozenset[str] = frozenset()
) -> tuple[list[int] | None, MessageFilter | None]:
    """`{"ids"}` or `{"filter"}` of a bulk request (of `filter_class`); `extra` names the
    request's other fields, which the caller reads."""
    body = validation.body_object(body)
    unknown = body.keys() - {"ids", "filter"} - extra
    if unknown:
        field = sorted(unknown)[0]
        raise InvalidRequest(f"{field} is not a field of this request.", details={"field": field})
    if ("ids" in body) == ("filter" in body):
        raise InvalidRequest("Give either ids or filter.", details={"field": "ids"})
    if "ids" in body:
        return validation.ids_list(body["ids"]), None
    if not isinstance(body["filter"], dict):
        raise InvalidRequest("filter must be an object.", details={"field": "filter"})
    return None, filter_class.parse(body["filter"], field_prefix="filter.", blank_is_absent=False)


class MoveView(APIView):
    permission_classes = [IsAdminToken]

    @extend_schema(
        operation_id="messages_move",
        request=MoveRequestSerializer,
        responses={200: MoveResponseSerializer, 202: MoveResponseSerializer, **ERRORS},
        description="Waiting and dead messages to another topic and group (a shovel); running ones are "
        "skipped and reported; a job id for large filters.",
    )
    def post(self, request: Request) -> Response:
        ids, flt = bulk_target(request.data, extra=frozenset({"to_topic", "to_group"}))
        body = request.data
        for field in ("to_topic", "to_group"):
            if field not in body:
                raise InvalidRequest(f"{field} is required.", details={"field": field})
        to_topic = validation.name(body["to_topic"], "to_topic")
        to_group = validation.name(body["to_group"], "to_group")
        result = messages_move(
            principal=request.user, ids=ids, filter=flt, to_topic=to_topic, to_group=to_group
        )
        return Response(
            result, status=status.HTTP_202_ACCEPTED if "job" in result else status.HTTP_200_OK
        )
