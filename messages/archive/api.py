"""REST doors for the archive: search, one archived message with its trace, redrive. Parse,
call one selector or service, render."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from messages import selectors as message_selectors
from messages.archive import selectors
from messages.archive.models import MessageArchive
from messages.archive.redrive import archive_messages_redrive
from messages.archive.serializers import (
    ArchivedDetailSerializer,
    ArchivePageSerializer,
    ArchiveRedriveRequestSerializer,
    ArchiveRedriveResponseSerializer,
)
from messages.delivery import validation
from messages.filters import ArchiveFilter
from messages.keyset import PAGE_SIZE
from messages.operations.api import bulk_target
from messages.serializers import ERRORS, message_full, trace_event
from mqcenter.core.auth import IsAdminToken

ARCHIVE_FILTERS = (
    "topic",
    "group",
    "status",
    "key",
    "id",
    "added_after",
    "added_before",
    "finished_after",
    "finished_before",
    "text",
    "tag",
    "priority",
    "cursor",
)


def archived_full(message: MessageArchive) -> dict[str, Any]:
    return {**message_full(message), "archived_at": message.archived_at}  # type: ignore[arg-type]


class ArchiveMessagesView(APIView):
    permission_classes = [IsAdminToken]

    @extend_schema(
        operation_id="archive_search",
        parameters=[OpenApiParameter(name, str, required=False) for name in ARCHIVE_FILTERS]
        + [OpenApiParameter("limit", int, required=False)],
        responses={200: ArchivePageSerializer, **ERRORS},
        description="Archived messages, newest first, with the message search's filters plus when they finished.",
    )
    def get(self, request: Request) -> Response:
        params = request.query_params.dict()
        cursor = params.pop("cursor", None)
        limit = validation.int_param(params.pop("limit", None), "limit", PAGE_SIZE)
        page, next_cursor = selectors.archive_search(
            principal=request.user, filter=ArchiveFilter.parse(params), cursor=cursor, limit=limit
        )
        return Response({"messages": [archived_full(m) for m in page], "next_cursor": next_cursor})


class ArchiveMessageView(APIView):
    permission_classes = [IsAdminToken]

    @extend_schema(
        operation_id="archive_detail", responses={200: ArchivedDetailSerializer, **ERRORS}
    )
    def get(self, request: Request, archived_id: int) -> Response:
        message = selectors.archive_get(principal=request.user, message_id=archived_id)
        trace = message_selectors.message_trace(message)
        return Response({**archived_full(message), "trace": [trace_event(e) for e in trace]})


class ArchiveRedriveView(APIView):
    permission_classes = [IsAdminToken]

    @extend_schema(
        operation_id="archive_redrive",
        request=ArchiveRedriveRequestSerializer,
        responses={
            200: ArchiveRedriveResponseSerializer,
            202: ArchiveRedriveResponseSerializer,
            **ERRORS,
        },
        description="Copies of archived messages back into the live table as NEW (fresh ids, "
        'headers["mq-replay-of"]); a job id for large filters.',
    )
    def post(self, request: Request) -> Response:
        ids, flt = bulk_target(request.data, filter_class=ArchiveFilter)
        assert flt is None or isinstance(flt, ArchiveFilter)
        result = archive_messages_redrive(principal=request.user, ids=ids, filter=flt)
        return Response(
            result, status=status.HTTP_202_ACCEPTED if "job" in result else status.HTTP_200_OK
        )
