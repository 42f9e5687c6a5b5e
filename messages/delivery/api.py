"""REST doors of the delivery core: produce (and, on the same URL, the admin search), pull,
ack, extend and release. Parse, call one service, render; no rules live here."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from messages import selectors
from messages.delivery import acks, pull, pull_many, validation
from messages.delivery.answers import pull_answer
from messages.delivery.serializers import (
    AckRequestSerializer,
    AckResponseSerializer,
    ExtendRequestSerializer,
    ExtendResponseSerializer,
    ProduceRequestSerializer,
    ProduceResponseSerializer,
    PullRequestSerializer,
    PullResponseSerializer,
    ReleaseRequestSerializer,
)
from messages.filters import MessageFilter
from messages.serializers import ERRORS, MessagePageSerializer, message_full
from messages.transactions.api import produce_request
from mqcenter.core.auth import IsAdminToken
from mqcenter.longpoll import SCOPE_KEY, LongPollState, ParkedPull


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
            for name in ("topic", "group", "status", "key", "tag", "id", "priority", "added_after", "added_before", "text", "cursor")
        ]
        + [OpenApiParameter("limit", int, required=False)],
        responses={200: MessagePageSerializer, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        params = request.query_params.dict()
        cursor = params.pop("cursor", None)
        limit = validation.int_param(params.pop("limit", None), "limit", selectors.PAGE_SIZE)
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
        results = args.pop("results")
        wait = args.pop("wait_seconds")
        # The long-poll layer's state: absent without it (the pull answers after one claim).
        longpoll: LongPollState | None = request.META.get("asgi.scope", {}).get(SCOPE_KEY)
        remaining = min(wait, longpoll.remaining) if longpoll is not None else 0.0

        def attempt(remaining: float) -> tuple[list[Any], float | None]:
            messages, park, _ = pull.messages_pull(principal=request.user, wait_remaining=remaining, **args)
            return messages, park

        # The first attempt applies the acks the pull carries, in its claim's transaction.
        messages, park, outcomes = pull.messages_pull(principal=request.user, wait_remaining=remaining,
                                                      results=results, **args)
        if park is not None and longpoll is not None:
            spec = pull_many.PullSpec(request.user, args["topic"], args["group"], args["consumer"], args["max_messages"])
            longpoll.park = (park, ParkedPull(attempt, lambda claimed: pull_answer(claimed, outcomes),
                                              (args["topic"], args["group"]), spec, _claim_many))
            return HttpResponse(status=204)
        return HttpResponse(pull_answer(messages, outcomes), content_type="application/json")


def _claim_many(specs: list[Any], remaining: list[float]) -> list[tuple[list[Any], float | None] | None]:
    return [None if attempt is None else (attempt.messages, attempt.wait)
            for attempt in pull_many.messages_pull_many(specs, remaining)]


class AckView(APIView):
    @extend_schema(operation_id="ack", request=AckRequestSerializer, responses={200: AckResponseSerializer, **ERRORS})
    def post(self, request: Request) -> Response:
        consumer, results = validation.ack_request(request.data)
        outcomes = acks.messages_ack(principal=request.user, consumer=consumer, results=results)
        return Response({"results": outcomes})


class ExtendView(APIView):
    @extend_schema(
        operation_id="extend", request=ExtendRequestSerializer, responses={200: ExtendResponseSerializer, **ERRORS}
    )
    def post(self, request: Request) -> Response:
        args = validation.extend_request(request.data)
        return Response({"results": acks.messages_extend(principal=request.user, **args)})


class ReleaseView(APIView):
    @extend_schema(
        operation_id="release", request=ReleaseRequestSerializer, responses={200: ExtendResponseSerializer, **ERRORS}
    )
    def post(self, request: Request) -> Response:
        args = validation.release_request(request.data)
        return Response({"results": acks.messages_release(principal=request.user, **args)})
