"""REST doors for a topic's groups (subscriptions): create, read, change, replay, delete."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from django.conf import settings
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from messages import subscriptions
from messages.delivery.validation import NAME_PATTERN
from messages.routing.filters import filter_parse
from messages.serializers import ErrorSerializer
from mqcenter.core.auth import IsAdminToken, Principal
from mqcenter.core.errors import Forbidden, InvalidRequest
from topics.models import Topic, TopicGroup
from topics.services import topic_get, topic_require_biz, topics_for_produce

ERRORS = {code: ErrorSerializer for code in (400, 401, 403, 404, 409, 503)}
CREATE_FIELDS = {"group", "start", "filter", *subscriptions.GROUP_SETTINGS}
UPDATE_FIELDS = {"filter", *subscriptions.GROUP_SETTINGS}
FAIR_HELP = ("queue mode: claims take the keys' messages round-robin (one per key per round, messages "
             "without a key as one key; priority is not used within the fair order)")
FILTER_HELP = ('{"tags": [...]} or {"expression": "tag IN (\'a\') AND region = \'eu\'"}: a publish is copied '
               "to the group only when it matches; null: every publish")

GroupStatusSerializer = inline_serializer("GroupStatus", {
    "topic": serializers.CharField(), "group": serializers.CharField(),
    "subscribed": serializers.BooleanField(help_text="false: messages are sent to it by name only; publishes do not copy"
                                           " to it until a consumer or an operator subscribes it"),
    "mode": serializers.CharField(), "paused": serializers.BooleanField(), "max_in_flight": serializers.IntegerField(allow_null=True),
    "rate_per_second": serializers.FloatField(allow_null=True), "key_concurrency": serializers.IntegerField(),
    "fair_keys": serializers.BooleanField(help_text=FAIR_HELP),
    "backlog": serializers.IntegerField(), "in_flight": serializers.IntegerField(),
    "dead": serializers.IntegerField(), "oldest_age_seconds": serializers.FloatField(allow_null=True),
    "consumers_online": serializers.IntegerField(), "last_pull_at": serializers.DateTimeField(allow_null=True),
    "created_at": serializers.DateTimeField(),
    "filter": serializers.DictField(allow_null=True, help_text=FILTER_HELP),
    "filter_set_at": serializers.DateTimeField(allow_null=True),
    "filtered_out": serializers.IntegerField(help_text="publishes the filter kept from the group since it was set"),
})
GroupListSerializer = serializers.ListSerializer(child=GroupStatusSerializer)
GroupCreateSerializer = inline_serializer("GroupCreate", {
    "group": serializers.RegexField(NAME_PATTERN), "mode": serializers.CharField(required=False),
    "start": serializers.CharField(required=False, help_text='"latest" (default), "earliest" or an ISO time'),
    "paused": serializers.BooleanField(required=False),
    "max_in_flight": serializers.IntegerField(required=False, allow_null=True),
    "rate_per_second": serializers.FloatField(required=False, allow_null=True),
    "key_concurrency": serializers.IntegerField(required=False),
    "fair_keys": serializers.BooleanField(required=False, help_text=FAIR_HELP),
    "filter": serializers.DictField(required=False, allow_null=True, help_text=FILTER_HELP),
})
GroupUpdateSerializer = inline_serializer("GroupUpdate", {
    "mode": serializers.CharField(required=False), "paused": serializers.BooleanField(required=False),
    "max_in_flight": serializers.IntegerField(required=False, allow_null=True),
    "rate_per_second": serializers.FloatField(required=False, allow_null=True),
    "key_concurrency": serializers.IntegerField(required=False),
    "fair_keys": serializers.BooleanField(required=False, help_text=FAIR_HELP),
    "filter": serializers.DictField(required=False, allow_null=True, help_text=FILTER_HELP),
})
JobSerializer = inline_serializer("ReplayJob", {"job": serializers.IntegerField(), "group": serializers.CharField()})


class ReadsOrAdmin(BasePermission):
    """Reading a group's state takes any scope on its topic (checked in the view); changing
    it takes `admin`."""

    def has_permission(self, request: Any, view: Any) -> bool:
        if request.method == "GET":
            return bool(request.user and request.user.is_authenticated)
        return IsAdminToken().has_permission(request, view)


def _topic(principal: Principal, name: str, *, admin: bool, create: bool = False) -> Topic:
    if create and re.fullmatch(NAME_PATTERN, name):
        topic = topics_for_produce(principal=principal, names=[name], auto_create=settings.MQ_AUTO_CREATE_TOPICS)[name]
    else:
        topic = topic_get(name)
    topic_require_biz(principal, topic)
    if not admin and not (principal.may("consume", name) or principal.may("produce", name)):
        raise Forbidden(f"This token has no scope for topic {name!r}.")
    return topic


def _body(data: Any, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise InvalidRequest("The body must be a JSON object.")
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise InvalidRequest(f"{unknown[0]} is not a field of a group.", details={"field": unknown[0]})
    return data


def _status(topic: Topic, group: TopicGroup) -> dict[str, Any]:
    return subscriptions.group_status(topic=topic, group=group)


class GroupListView(APIView):
    permission_classes = [ReadsOrAdmin]

    @extend_schema(operation_id="group_list", responses={200: GroupListSerializer, **ERRORS})
    def get(self, request: Request, topic: str) -> Response:
        row = _topic(request.user, topic, admin=False)
        return Response([_status(row, g) for g in row.groups.all()])

    @extend_schema(operation_id="group_create", request=GroupCreateSerializer,
                   responses={201: GroupStatusSerializer, 202: JobSerializer, **ERRORS})
    def post(self, request: Request, topic: str) -> Response:
        body = _body(request.data, CREATE_FIELDS)
        name = body.get("group")
        if not isinstance(name, str) or not re.fullmatch(NAME_PATTERN, name):
            raise InvalidRequest("group must be a name of letters, digits and _.:- (1-200 chars).",
                                 details={"field": "group"})
        start = subscriptions.start_parse(body.get("start"))
        limits = {k: v for k, v in body.items() if k in subscriptions.GROUP_SETTINGS and k != "mode"}
        mode = body.get("mode", "queue")
        subscriptions.group_settings_validated({"mode": mode, **limits})  # before a topic is made
        filter_parse(body.get("filter"))
        # A topic that does not exist yet is created as a produce creates it (MQ_AUTO_CREATE_TOPICS).
        row = _topic(request.user, topic, admin=True, create=True)
        group, job = subscriptions.group_create(
            principal=request.user, topic=row, name=name, mode=mode, start=start, limits=limits,
            filter=body.get("filter"),
        )
        if job is not None:
            return Response({"job": job, "group": name}, status=status.HTTP_202_ACCEPTED)
        return Response(_status(row, group), status=status.HTTP_201_CREATED)


class GroupDetailView(APIView):
    permission_classes = [ReadsOrAdmin]

    @extend_schema(operation_id="group_detail", responses={200: GroupStatusSerializer, **ERRORS})
    def get(self, request: Request, topic: str, group: str) -> Response:
        row = _topic(request.user, topic, admin=False)
        return Response(_status(row, subscriptions.group_get(principal=request.user, topic=row, name=group)))

    @extend_schema(operation_id="group_update", request=GroupUpdateSerializer,
                   responses={200: GroupStatusSerializer, **ERRORS})
    def patch(self, request: Request, topic: str, group: str) -> Response:
        row = _topic(request.user, topic, admin=True)
        changes = _body(request.data, UPDATE_FIELDS)
        updated = subscriptions.group_update(principal=request.user, topic=row, name=group, changes=changes)
        return Response(_status(row, updated))

    @extend_schema(operation_id="group_delete", responses={204: None, **ERRORS})
    def delete(self, request: Request, topic: str, group: str) -> Response:
        row = _topic(request.user, topic, admin=True)
        subscriptions.group_delete(principal=request.user, topic=row, name=group)
        return Response(status=status.HTTP_204_NO_CONTENT)


class GroupReplayView(APIView):
    permission_classes = [IsAdminToken]

    @extend_schema(
        operation_id="group_replay",
        request=inline_serializer("GroupReplay", {"since": serializers.DateTimeField()}),
        responses={200: OpenApiResponse(description="replayed"), 202: JobSerializer, **ERRORS},
    )
    def post(self, request: Request, topic: str, group: str) -> Response:
        row = _topic(request.user, topic, admin=True)
        body = _body(request.data, {"since"})
        since = subscriptions.start_parse(body.get("since", ""), field="since")
        if not isinstance(since, datetime):
            raise InvalidRequest("since must be an ISO 8601 time with offset.", details={"field": "since"})
        job = subscriptions.group_replay(principal=request.user, topic=row, name=group, since=since)
        if job is not None:
            return Response({"job": job, "group": group}, status=status.HTTP_202_ACCEPTED)
        return Response(_status(row, subscriptions.group_get(principal=request.user, topic=row, name=group)))
