"""REST doors for transactional produce, commit and rollback: parse, call one service, render."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from messages.delivery import validation
from messages.delivery.produce import messages_produce
from messages.delivery.validation import CORRELATION_HEADER
from messages.models import Message
from messages.serializers import ErrorSerializer
from messages.services import publish_notes
from messages.transactions import services as transactions
from messages.transactions.models import Transaction
from mqcenter.core.auth import Principal
from mqcenter.core.errors import InvalidRequest

DEFAULT_CHECK_AFTER_SECONDS = 30

ERRORS = {code: ErrorSerializer for code in (400, 401, 403, 404, 409, 413, 429, 503)}


def produce_request(principal: Principal, data: Any) -> tuple[int, dict[str, Any]]:
    """A produce body, plain or transactional, to (status, answer): the one place that tells
    the two apart, so a transactional batch is never stored as NEW."""
    items = validation.produce_items(data)
    spec = data.get("transaction") if isinstance(data, dict) else None
    if spec is None:
        results = messages_produce(principal=principal, items=items)
        answer = [r.as_dict() for r in results]
        if any(CORRELATION_HEADER in item.headers for item in items):
            _add_correlation_ids(answer)
        notes = publish_notes(items, results)
        return 201, {"messages": answer, **({"notes": notes} if notes else {})}
    if not isinstance(spec, dict):
        raise InvalidRequest("transaction must be an object.", details={"field": "transaction"})
    unknown = spec.keys() - {"check_url", "check_after_seconds"}
    if unknown:
        field = f"transaction.{sorted(unknown)[0]}"
        raise InvalidRequest(f"{field} is not a transaction field.", details={"field": field})
    batch = transactions.transaction_prepare(
        principal=principal, items=items, check_url=spec.get("check_url"),
        check_after_seconds=spec.get("check_after_seconds", DEFAULT_CHECK_AFTER_SECONDS),
    )
    notes = publish_notes(items, batch.results)
    return 201, {"transaction_id": batch.transaction.id, "messages": [r.as_dict() for r in batch.results],
                 **({"notes": notes} if notes else {})}


def _add_correlation_ids(entries: list[dict[str, Any]]) -> None:
    """Each entry's `correlation_id` (one the broker made up for a `reply_to` included)."""
    by_id = dict(Message.objects.filter(id__in=[e["id"] for e in entries]).values_list("id", "headers"))
    for entry in entries:
        entry["correlation_id"] = (by_id.get(entry["id"]) or {}).get(CORRELATION_HEADER)


def transaction_answer(txn: Transaction) -> dict[str, Any]:
    return {
        "transaction_id": txn.id, "state": txn.state, "topics": txn.topics, "message_ids": txn.message_ids,
        "check_url": txn.check_url, "check_after_seconds": txn.check_after_seconds,
        "next_check_at": txn.next_check_at, "attempts": txn.attempts, "last_error": txn.last_error,
        "created_at": txn.created_at, "finished_at": txn.finished_at, "log": txn.log,
    }


TransactionSerializer = inline_serializer(
    "Transaction",
    {
        "transaction_id": serializers.CharField(), "state": serializers.ChoiceField(Transaction.State.choices),
        "topics": serializers.ListField(child=serializers.CharField()),
        "message_ids": serializers.ListField(child=serializers.IntegerField()),
        "check_url": serializers.CharField(), "check_after_seconds": serializers.IntegerField(),
        "next_check_at": serializers.DateTimeField(), "attempts": serializers.IntegerField(),
        "last_error": serializers.CharField(), "created_at": serializers.DateTimeField(),
        "finished_at": serializers.DateTimeField(allow_null=True),
        "log": serializers.ListField(child=serializers.DictField()),
    },
)


class TransactionView(APIView):
    """GET: a transaction (any token that may produce to all its topics)."""

    @extend_schema(operation_id="transaction_detail", responses={200: TransactionSerializer, **ERRORS})
    def get(self, request: Request, transaction_id: str) -> Response:
        txn = transactions.transaction_get(principal=request.user, transaction_id=transaction_id)
        return Response(transaction_answer(txn))


class TransactionCommitView(APIView):
    body_optional = True  # an action: no body, or {}

    @extend_schema(operation_id="transaction_commit", request=None, responses={200: TransactionSerializer, **ERRORS})
    def post(self, request: Request, transaction_id: str) -> Response:
        validation.no_fields(request.data)
        txn = transactions.transaction_commit(principal=request.user, transaction_id=transaction_id)
        return Response(transaction_answer(txn), status=status.HTTP_200_OK)


class TransactionRollbackView(APIView):
    body_optional = True

    @extend_schema(operation_id="transaction_rollback", request=None, responses={200: TransactionSerializer, **ERRORS})
    def post(self, request: Request, transaction_id: str) -> Response:
        validation.no_fields(request.data)
        txn = transactions.transaction_rollback(principal=request.user, transaction_id=transaction_id)
        return Response(transaction_answer(txn), status=status.HTTP_200_OK)
