"""REST doors for recurring messages (schedules): parse, call one service, render."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from messages.delivery import validation
from messages.schedules import services as schedules
from messages.serializers import ErrorSerializer
from mqcenter.core.auth import IsAdminToken

SCHEDULE_FIELDS = {
    "id": serializers.IntegerField(read_only=True),
    "name": serializers.CharField(),
    "topic": serializers.CharField(),
    "group": serializers.CharField(allow_null=True, required=False),
    "data": serializers.JSONField(required=False),
    "headers": serializers.DictField(child=serializers.CharField(), required=False),
    "cron": serializers.CharField(),
    "timezone": serializers.CharField(required=False),
    "enabled": serializers.BooleanField(required=False),
    "next_run_at": serializers.DateTimeField(read_only=True, allow_null=True),
    "last_run_at": serializers.DateTimeField(read_only=True, allow_null=True),
    "last_message_id": serializers.IntegerField(read_only=True, allow_null=True),
    "last_error": serializers.CharField(read_only=True),
}
ScheduleSerializer = inline_serializer("Schedule", SCHEDULE_FIELDS)
ScheduleListSerializer = inline_serializer(
    "ScheduleList",
    {"schedules": serializers.ListField(child=inline_serializer("ScheduleItem", SCHEDULE_FIELDS))},
)
RunSerializer = inline_serializer("ScheduleRun", {"message": serializers.DictField()})

ERRORS = {code: ErrorSerializer for code in (400, 401, 403, 404, 409, 413, 429, 503)}


class SchedulesView(APIView):
    permission_classes = [IsAdminToken]

    @extend_schema(operation_id="schedules_list", responses={200: ScheduleListSerializer, **ERRORS})
    def get(self, request: Request) -> Response:
        rows = schedules.schedules_list(principal=request.user)
        return Response({"schedules": [schedules.schedule_dict(s) for s in rows]})

    @extend_schema(
        operation_id="schedule_create",
        request=ScheduleSerializer,
        responses={201: ScheduleSerializer, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        schedule = schedules.schedule_create(
            principal=request.user, fields=validation.body_object(request.data)
        )
        return Response(schedules.schedule_dict(schedule), status=status.HTTP_201_CREATED)


class ScheduleView(APIView):
    permission_classes = [IsAdminToken]

    @extend_schema(operation_id="schedule_detail", responses={200: ScheduleSerializer, **ERRORS})
    def get(self, request: Request, schedule_id: int) -> Response:
        return Response(
            schedules.schedule_dict(
                schedules.schedule_get(principal=request.user, schedule_id=schedule_id)
            )
        )

    @extend_schema(
        operation_id="schedule_update",
        request=ScheduleSerializer,
        responses={200: ScheduleSerializer, **ERRORS},
    )
    def patch(self, request: Request, schedule_id: int) -> Response:
        schedule = schedules.schedule_update(
            principal=request.user,
            schedule_id=schedule_id,
            fields=validation.body_object(request.data),
        )
        return Response(schedules.schedule_dict(schedule))

    @extend_schema(operation_id="schedule_delete", responses={204: None, **ERRORS})
    def delete(self, request: Request, schedule_id: int) -> Response:
        schedules.schedule_delete(principal=request.user, schedule_id=schedule_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ScheduleRunView(APIView):
    permission_classes = [IsAdminToken]
    body_optional = True  # an action: no body, or {}

    @extend_schema(operation_id="schedule_run", request=None, responses={201: RunSerializer, **ERRORS})
    def post(self, request: Request, schedule_id: int) -> Response:
        validation.no_fields(request.data)
        result = schedules.schedule_run(principal=request.user, schedule_id=schedule_id)
        return Response({"message": result.as_dict()}, status=status.HTTP_201_CREATED)
