"""Message representations for administration: the API.md shapes of a message with its
state and trace, the error body, and serializers describing them in OpenAPI. The hot path's
answers are in messages/delivery/answers.py."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from messages.delivery.answers import message_delivery
from messages.models import Message, MessageTrace, Status


def message_full(message: Message) -> dict[str, Any]:
    """A message as administration sees it: the delivery view plus its state."""
    return {
        **message_delivery(message),
        "status": message.status,
        "priority": message.priority,
        "expires_at": message.expires_at,
        "dedup_key": message.dedup_key,
        "lease_owner": message.lease_owner,
        "last_log": message.last_log,
        "update_time": message.update_time,
        "copied_at": message.copied_at,
    }


def trace_event(event: MessageTrace) -> dict[str, Any]:
    return {
        "event": event.event,
        "actor": event.actor,
        "at": event.at,
        "attempt": event.attempt,
        "rank": event.rank,
        "total": event.total,
        "status": event.status_after,
        "log": event.log,
    }


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    details = serializers.DictField()


class ErrorSerializer(serializers.Serializer):
    error = ErrorDetailSerializer()


class MessageSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    topic = serializers.CharField()
    group = serializers.CharField()
    data = serializers.JSONField()
    key = serializers.CharField(allow_null=True)
    headers = serializers.DictField(child=serializers.CharField())
    status = serializers.ChoiceField(choices=Status.values)
    priority = serializers.IntegerField()
    expires_at = serializers.DateTimeField(allow_null=True)
    effect_time = serializers.DateTimeField()
    retry_remaining = serializers.IntegerField()
    attempt = serializers.IntegerField()
    timeout_seconds = serializers.IntegerField()
    dedup_key = serializers.CharField(allow_null=True)
    lease_owner = serializers.CharField(allow_null=True)
    lease_expires_at = serializers.DateTimeField(allow_null=True)
    last_log = serializers.CharField()
    add_time = serializers.DateTimeField()
    update_time = serializers.DateTimeField()
    copied_at = serializers.DateTimeField(allow_null=True)


class TraceEventSerializer(serializers.Serializer):
    event = serializers.CharField()
    actor = serializers.CharField()
    at = serializers.DateTimeField()
    attempt = serializers.IntegerField()
    rank = serializers.IntegerField(allow_null=True)
    total = serializers.IntegerField(allow_null=True)
    status = serializers.CharField()
    log = serializers.CharField()


class MessageDetailSerializer(MessageSerializer):
    trace = TraceEventSerializer(many=True)


class MessagePageSerializer(serializers.Serializer):
    messages = MessageSerializer(many=True)
    next_cursor = serializers.CharField(allow_null=True)


class MessageEditSerializer(serializers.Serializer):
    data = serializers.JSONField(required=False)
    status = serializers.ChoiceField(choices=["NEW", "SUCCESS", "FAIL", "TIMEOUT"], required=False)
    effect_time = serializers.DateTimeField(required=False)
    retry_remaining = serializers.IntegerField(min_value=0, max_value=1000, required=False)


class MessageFilterSerializer(serializers.Serializer):
    topic = serializers.CharField(required=False)
    group = serializers.CharField(required=False)
    status = serializers.ListField(child=serializers.ChoiceField(choices=Status.values), required=False)
    key = serializers.CharField(required=False)
    id = serializers.IntegerField(required=False)
    priority = serializers.IntegerField(min_value=0, max_value=9, required=False)
    added_after = serializers.DateTimeField(required=False)
    added_before = serializers.DateTimeField(required=False)
    text = serializers.CharField(required=False)


# The error answers every operation may give, for its OpenAPI description.
ERRORS = {code: ErrorSerializer for code in (400, 401, 403, 404, 409, 413, 429, 503)}
