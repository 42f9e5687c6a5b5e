"""OpenAPI descriptions of the bulk operations' requests and answers (requeue, redrive,
delete, cancel, move) and of a bulk job."""

from __future__ import annotations

from rest_framework import serializers

from messages.serializers import MessageFilterSerializer


class BulkRequestSerializer(serializers.Serializer):
    ids = serializers.ListField(child=serializers.IntegerField(min_value=1), required=False, max_length=10000)
    filter = MessageFilterSerializer(required=False)


class BulkResponseSerializer(serializers.Serializer):
    count = serializers.IntegerField(required=False)
    job = serializers.IntegerField(required=False)


class SkippedSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    reason = serializers.CharField()


class MoveRequestSerializer(BulkRequestSerializer):
    to_topic = serializers.RegexField(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$")
    to_group = serializers.RegexField(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$")


class MovedSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    moved_from = serializers.IntegerField()


class MoveResponseSerializer(serializers.Serializer):
    count = serializers.IntegerField(required=False)
    moved = MovedSerializer(many=True, required=False)
    skipped = SkippedSerializer(many=True, required=False)
    job = serializers.IntegerField(required=False)


class JobSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    state = serializers.CharField()
    total = serializers.IntegerField()
    processed = serializers.IntegerField()
    error = serializers.CharField()
    filter = serializers.DictField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
