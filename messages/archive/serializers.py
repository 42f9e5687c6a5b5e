"""OpenAPI descriptions of the archive's answers and of archive redrive."""

from __future__ import annotations

from rest_framework import serializers

from messages.operations.serializers import SkippedSerializer
from messages.serializers import MessageFilterSerializer, MessageSerializer, TraceEventSerializer


class ArchivedMessageSerializer(MessageSerializer):
    archived_at = serializers.DateTimeField()


class ArchivedDetailSerializer(ArchivedMessageSerializer):
    trace = TraceEventSerializer(many=True)


class ArchivePageSerializer(serializers.Serializer):
    messages = ArchivedMessageSerializer(many=True)
    next_cursor = serializers.CharField(allow_null=True)


class ArchiveFilterSerializer(MessageFilterSerializer):
    finished_after = serializers.DateTimeField(required=False)
    finished_before = serializers.DateTimeField(required=False)


class ArchiveRedriveRequestSerializer(serializers.Serializer):
    ids = serializers.ListField(child=serializers.IntegerField(min_value=1), required=False, max_length=10000)
    filter = ArchiveFilterSerializer(required=False)


class ArchiveCopySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    replay_of = serializers.IntegerField()


class ArchiveRedriveResponseSerializer(serializers.Serializer):
    count = serializers.IntegerField(required=False)
    copies = ArchiveCopySerializer(many=True, required=False)
    skipped = SkippedSerializer(many=True, required=False)
    job = serializers.IntegerField(required=False)
