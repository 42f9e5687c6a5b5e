"""REST doors for messages: parse, call one service, render. No rules live here."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from messages import selectors, services, validation
from messages.filters import MessageFilter
from messages.serializers import (
    AckRequestSerializer,
    AckResponseSerializer,
    BulkRequestSerializer,
    BulkResponseSerializer,
    ErrorSerializer,
    ExtendRequestSerializer,
    ExtendResponseSerializer,
    JobSerializer,
    MessageDetailSerializer,
    MessageEditSerializer,
    MessagePageSerializer,
    ProduceRequestSerializer,
    ProduceResponseSerializer,
    PullRequestSerializer,
    PullResponseSerializer,
    ReleaseRequestSerializer,
    StatsSerializer,
    message_full,
    pull_answer,
    trace_event,
)
from messages.transactions_api import produce_request
from mqcenter.core.auth import IsAdminToken
from mqcenter.core.errors import InvalidRequest
from mqcenter.longpoll import SCOPE_KEY, LongPollState, ParkedPull

ERRORS = {code: ErrorSerializer for code in (400, 401, 403, 404, 409, 413, 429, 503)}


class MessagesView(APIView):
    """POST: produce (any token with a produce scope). GET: search (admin)."""

    def get_permissions(self):  # type: ignore[no-untyped-def]
        if self.request.method == "GET":
            return [IsAdminToken()]
        return super().get_permissions()

    @extend_schema(
        operation_id="messages_search",
        parameters=[
            OpenApiParameter(name, str, required=False)
            for name in ("topic", "group", "status", "key", "id", "priority", "added_after", "added_before", "text", "cursor")
        ]
        + [OpenApiParameter("limit", int, required=False)],
        responses={200: MessagePageSerializer, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        params = request.query_params.dict()
        cursor = params.pop("cursor", None)
        limit = int_param(params.pop("limit", None), "limit", selectors.PAGE_SIZE)
        page, next_cursor = selectors.messages_search(
            principal=request.user, filter=MessageFilter.parse(params), cursor=cursor, limit=limit
        )
        return Response({"messages": [message_full(m) for m in page], "next_cursor": next_cursor})

    @extend_schema(
        operation_id="messages_produce",
        request=ProduceRequestSerializer,
        responses={201: ProduceResponseSerializer, **ERRORS},
        description="Store a batch of messages; answers after they are committed.",
    )
    def post(self, request: Request) -> Response:
        code, answer = produce_request(request.user, request.data)
        return Response(answer, status=code)


class PullView(APIView):
    """POST /api/v1/pull: one attempt of the long-poll (see mqcenter/longpoll.py, which waits
    between attempts and keeps a park from the client)."""

    @extend_schema(
        operation_id="pull",
        request=PullRequestSerializer,
        responses={200: PullResponseSerializer, **ERRORS},
        description="Claim deliverable messages; long-polls up to wait_seconds for the first.",
    )
    def post(self, request: Request) -> HttpResponse:
        args = validation.pull_request(request.data)
        outcomes = services.acks_before_pull(
            principal=request.user, topic=args["topic"], consumer=args["consumer"], results=args.pop("results")
        )
        wait = args.pop("wait_seconds")
        # The long-poll layer's state: absent without it (the pull answers after one claim).
        longpoll: LongPollState | None = request.META.get("asgi.scope", {}).get(SCOPE_KEY)
        remaining = min(wait, longpoll.remaining) if longpoll is not None else 0.0

        def attempt(remaining: float) -> tuple[list[Any], float | None]:
            return services.messages_pull(principal=request.user, wait_remaining=remaining, **args)

        messages, park = attempt(remaining)
        if park is not None and longpoll is not None:
            longpoll.park = (park, ParkedPull(attempt, lambda claimed: pull_answer(claimed, outcomes)))
            return HttpResponse(status=204)
        return HttpResponse(pull_answer(messages, outcomes), content_type="application/json")


class AckView(APIView):
    @extend_schema(operation_id="ack", request=AckRequestSerializer, responses={200: AckResponseSerializer, **ERRORS})
    def post(self, request: Request) -> Response:
        consumer, results = validation.ack_request(request.data)
        outcomes = services.messages_ack(principal=request.user, consumer=consumer, results=results)
        return Response({"results": outcomes})


class ExtendView(APIView):
    @extend_schema(
        operation_id="extend", request=ExtendRequestSerializer, responses={200: ExtendResponseSerializer, **ERRORS}
    )
    def post(self, request: Request) -> Response:
        args = validation.extend_request(request.data)
        return Response({"results": services.messages_extend(principal=request.user, **args)})


class ReleaseView(APIView):
    @extend_schema(
        operation_id="release", request=ReleaseRequestSerializer, responses={200: ExtendResponseSerializer, **ERRORS}
    )
    def post(self, request: Request) -> Response:
        args = validation.release_request(request.data)
        return Response({"results": services.messages_release(principal=request.user, **args)})


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
        services.messages_delete(principal=request.user, ids=[message_id])
        return Response(status=status.HTTP_204_NO_CONTENT)


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
        result = services.messages_requeue(principal=request.user, ids=ids, filter=flt, dead_only=self.dead_only)
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
        result = services.messages_delete(principal=request.user, ids=ids, filter=flt)
        return Response(result, status=status.HTTP_202_ACCEPTED if "job" in result else status.HTTP_200_OK)


class MessageCancelView(APIView):
    permission_classes = [IsAdminToken]
    body_optional = True  # an action: no body, or {}

    @extend_schema(operation_id="message_cancel", request=None, responses={200: MessageDetailSerializer, **ERRORS},
                   description="A NEW (or delayed) or PREPARED message becomes CANCELLED; running or finished: 409.")
    def post(self, request: Request, message_id: int) -> Response:
        validation.no_fields(request.data)
        services.message_cancel(principal=request.user, message_id=message_id)
        return MessageDetailView().get(request, message_id)


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
        result = services.messages_cancel(principal=request.user, ids=ids, filter=flt)
        return Response(result, status=status.HTTP_202_ACCEPTED if "job" in result else status.HTTP_200_OK)


class JobView(APIView):
    permission_classes = [IsAdminToken]

    @extend_schema(operation_id="job_detail", responses={200: JobSerializer, **ERRORS})
    def get(self, request: Request, job_id: int) -> Response:
        job = services.bulk_job_get(principal=request.user, job_id=job_id)
        return Response({
            "id": job.id, "kind": job.kind, "state": job.state, "total": job.total,
            "processed": job.processed, "error": job.error, "filter": job.filter,
            "created_at": job.created_at, "finished_at": job.finished_at,
        })


class StatsView(APIView):
    permission_classes = [IsAdminToken]

    @extend_schema(
        operation_id="stats",
        parameters=[OpenApiParameter("topic", str, required=False)],
        responses={200: StatsSerializer, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        topic = request.query_params.get("topic") or None
        return Response({"stats": selectors.topic_stats(principal=request.user, topic=topic)})


def int_param(value: str | None, field: str, default: int) -> int:
    if value is None:
        return default
    try:
        return int(value)  # "" too is refused: the parameter is documented as an integer
    except ValueError as exc:
        raise InvalidRequest(f"{field} must be an integer.", details={"field": field}) from exc


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
            changes["data"] = services.data_text(body["data"])
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
