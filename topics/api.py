"""REST doors for business lines and topics (administration)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from messages.delivery.validation import NAME_PATTERN
from messages.operations.purge import topic_remove
from messages.serializers import ErrorSerializer
from mqcenter.core.auth import IsAdminToken, Principal
from mqcenter.core.errors import Forbidden, InvalidRequest, NotFound
from topics import services
from topics.models import Biz, CheckGiveUp, DeliveryMode, Overflow, RetryStrategy, Topic
from topics.webhooks import MAX_WEBHOOKS, WEBHOOK_FORMATS

ERRORS = {code: ErrorSerializer for code in (400, 401, 403, 404, 409, 429, 503)}
PurgeJobSerializer = inline_serializer("TopicPurgeJob", {"job": serializers.IntegerField(), "topic": serializers.CharField()})


class BizSerializer(serializers.Serializer):
    id = serializers.IntegerField(read_only=True)
    name = serializers.RegexField(NAME_PATTERN, max_length=100)
    title = serializers.CharField(max_length=200, required=False, allow_blank=True)
    description = serializers.CharField(max_length=10000, required=False, allow_blank=True)
    created_at = serializers.DateTimeField(read_only=True)


class GroupSerializer(serializers.Serializer):
    group = serializers.RegexField(NAME_PATTERN, max_length=200)
    mode = serializers.ChoiceField(choices=DeliveryMode.values, default=DeliveryMode.QUEUE)


class WebhookSerializer(serializers.Serializer):
    # The host allow-list is checked by the topic services (topics/webhooks.py).
    url = serializers.CharField(max_length=2000)
    format = serializers.ChoiceField(choices=WEBHOOK_FORMATS, default="generic")


class TopicSerializer(serializers.Serializer):
    topic = serializers.RegexField(NAME_PATTERN, max_length=200)
    biz = serializers.RegexField(NAME_PATTERN, max_length=100, required=False, allow_null=True)
    owner = serializers.CharField(max_length=200, required=False, allow_blank=True)
    description = serializers.CharField(max_length=10000, required=False, allow_blank=True)
    retry_count = serializers.IntegerField(min_value=0, max_value=1000, required=False)
    retry_strategy = serializers.ChoiceField(choices=RetryStrategy.values, required=False)
    retry_interval_seconds = serializers.IntegerField(min_value=0, max_value=86400, required=False)
    timeout_seconds = serializers.IntegerField(min_value=1, max_value=7 * 86400, required=False)
    retention_days = serializers.IntegerField(min_value=1, max_value=3650, required=False)
    alarm_emails = serializers.ListField(child=serializers.EmailField(), max_length=50, required=False)
    alarm_webhooks = WebhookSerializer(many=True, required=False, max_length=MAX_WEBHOOKS)
    backlog_alarm_threshold = serializers.IntegerField(min_value=1, max_value=2**31 - 1, required=False, allow_null=True)
    max_backlog = serializers.IntegerField(
        min_value=1, max_value=10_000_000, required=False, allow_null=True,
        help_text="A produce that would leave a group with more NEW messages answers 429 backlog_full "
        "(or makes room, by `overflow`); a batch larger than it answers 400.",
    )
    overflow = serializers.ChoiceField(
        choices=Overflow.values, required=False,
        help_text="At max_backlog: reject (429), or drop_oldest / dead_letter_oldest (the oldest deliverable "
        "messages end EXPIRED with log \"overflow\" to make room).",
    )
    default_ttl_seconds = serializers.IntegerField(
        min_value=1, max_value=365 * 86400, required=False, allow_null=True,
        help_text="Messages that name no expiry expire this long after they come due.",
    )
    paused = serializers.BooleanField(required=False)
    check_give_up = serializers.ChoiceField(
        choices=CheckGiveUp.values, required=False,
        help_text="What the check-back does with a transaction nobody resolved within MQ_TRANSACTION_GIVE_UP_SECONDS.",
    )
    groups = GroupSerializer(many=True, required=False, max_length=100,
                             help_text="The topic's groups, each group name at most once.")

    def validate_groups(self, groups: list[dict[str, str]]) -> list[dict[str, str]]:
        # A PATCH validates partially, nested items too: a group without its name gets here.
        for index, group in enumerate(groups):
            if "group" not in group:
                raise serializers.ValidationError({index: {"group": ["This field is required."]}})
        names = [g["group"] for g in groups]
        if len(names) != len(set(names)):
            raise serializers.ValidationError("a group is listed twice")
        return groups


class TopicUpdateSerializer(TopicSerializer):
    topic = serializers.RegexField(NAME_PATTERN, max_length=200, required=False)


def biz_out(biz: Biz) -> dict[str, Any]:
    return {"id": biz.id, "name": biz.name, "title": biz.title, "description": biz.description,
            "created_at": biz.created_at}


def topic_out(topic: Topic, *, secrets: bool = True) -> dict[str, Any]:
    """A topic as the API answers it; webhook URLs masked unless `secrets` (the topic's
    admins only)."""
    return {"topic": topic.name, **services.topic_snapshot(topic, secrets=secrets), "created_at": topic.created_at,
            "updated_at": topic.updated_at}


def _valid(serializer_class: type[serializers.Serializer], data: Any, **kwargs: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise InvalidRequest("The body must be a JSON object.")
    serializer = serializer_class(data=data, **kwargs)
    _require_json_types(serializer.fields, data, "")
    serializer.is_valid(raise_exception=True)
    unknown = set(data) - set(serializer.fields)
    if unknown:
        field = sorted(unknown)[0]
        raise InvalidRequest(f"{field} is not a field of this resource.", details={"field": field})
    return dict(serializer.validated_data)


def _require_json_types(fields: Any, data: dict[str, Any], path: str) -> None:
    """Refuse JSON of the wrong type instead of letting DRF coerce it (5 -> "5", "1" -> 1,
    "yes" -> True): a client sending the wrong type has a bug it should hear about."""
    for name, value in data.items():
        field = fields.get(name)
        if field is not None:
            _require_json_type(field, value, f"{path}.{name}" if path else name)


def _require_json_type(field: serializers.Field, value: Any, where: str) -> None:
    if value is None:
        return  # allow_null is the serializer's decision
    if isinstance(field, serializers.ListSerializer):
        for index, item in enumerate(value if isinstance(value, list) else []):
            if isinstance(item, dict):
                unknown = sorted(set(item) - set(field.child.fields))
                if unknown:
                    name = f"{where}[{index}].{unknown[0]}"
                    raise InvalidRequest(f"{name} is not a field of this resource.", details={"field": name})
                _require_json_types(field.child.fields, item, f"{where}[{index}]")
        return
    if isinstance(field, serializers.ListField):
        for index, item in enumerate(value if isinstance(value, list) else []):
            _require_json_type(field.child, item, f"{where}[{index}]")
        return
    if isinstance(field, serializers.BooleanField):
        ok, kind = isinstance(value, bool), "true or false"
    elif isinstance(field, serializers.IntegerField):
        ok, kind = isinstance(value, int) and not isinstance(value, bool), "an integer"
    elif isinstance(field, serializers.CharField):
        ok, kind = isinstance(value, str), "a string"
    else:
        return
    if not ok:
        raise InvalidRequest(f"{where}: must be {kind}.", details={"field": where})


def _biz_for(principal: Principal, name: str | None) -> Biz | None:
    """The business line named in a request, which the caller must be allowed to reach."""
    if name is None:
        return None
    biz = Biz.objects.filter(name=name).first()
    if biz is None or not principal.may_biz(biz.id):  # another's answers as a missing one
        raise InvalidRequest(f"Business line {name!r} does not exist.", details={"field": "biz"})
    return biz


def _biz_get(principal: Principal, biz_id: int) -> Biz:
    biz = Biz.objects.filter(id=biz_id).first()
    if biz is None or not principal.may_biz(biz.id):
        raise NotFound(f"Business line {biz_id} does not exist.")
    return biz


class BizListView(APIView):
    permission_classes = [IsAdminToken]

    @extend_schema(operation_id="biz_list", responses={200: BizSerializer(many=True), **ERRORS})
    def get(self, request: Request) -> Response:
        rows = Biz.objects.all()
        if request.user.biz_ids is not None:
            rows = rows.filter(id__in=request.user.biz_ids)
        return Response([biz_out(b) for b in rows])

    @extend_schema(operation_id="biz_create", request=BizSerializer, responses={201: BizSerializer, **ERRORS})
    def post(self, request: Request) -> Response:
        if request.user.biz_ids is not None:
            raise Forbidden("Only a global admin token creates business lines.")
        data = _valid(BizSerializer, request.data)
        biz = services.biz_create(actor=request.user.name, **data)
        return Response(biz_out(biz), status=status.HTTP_201_CREATED)


class BizDetailView(APIView):
    permission_classes = [IsAdminToken]

    @extend_schema(operation_id="biz_detail", responses={200: BizSerializer, **ERRORS})
    def get(self, request: Request, biz_id: int) -> Response:
        return Response(biz_out(_biz_get(request.user, biz_id)))

    @extend_schema(operation_id="biz_update", request=BizSerializer(partial=True), responses={200: BizSerializer, **ERRORS})
    def patch(self, request: Request, biz_id: int) -> Response:
        biz = _biz_get(request.user, biz_id)
        data = _valid(BizSerializer, request.data, partial=True)
        if "name" in data and data["name"] != biz.name:
            raise InvalidRequest("A business line's name cannot change.", details={"field": "name"})
        return Response(biz_out(services.biz_update(actor=request.user.name, biz=biz, changes=data)))

    @extend_schema(operation_id="biz_delete", responses={204: None, **ERRORS})
    def delete(self, request: Request, biz_id: int) -> Response:
        services.biz_delete(actor=request.user.name, biz=_biz_get(request.user, biz_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class TopicListView(APIView):
    permission_classes = [IsAdminToken]

    @extend_schema(operation_id="topic_list", responses={200: TopicSerializer(many=True), **ERRORS})
    def get(self, request: Request) -> Response:
        rows = Topic.objects.select_related("biz").prefetch_related("groups")
        if request.user.biz_ids is not None:
            rows = rows.filter(biz_id__in=request.user.biz_ids)
        return Response([topic_out(t) for t in rows[:5000]])

    @extend_schema(operation_id="topic_create", request=TopicSerializer, responses={201: TopicSerializer, **ERRORS})
    def post(self, request: Request) -> Response:
        data = _valid(TopicSerializer, request.data)
        principal: Principal = request.user
        biz = _biz_for(principal, data.pop("biz", None))
        if biz is None and principal.home_biz_id is not None:
            biz = Biz.objects.get(id=principal.home_biz_id)
        if biz is None and principal.biz_ids is not None:
            raise InvalidRequest("Name the business line that owns the topic.", details={"field": "biz"})
        name, groups = data.pop("topic"), data.pop("groups", None)
        topic = services.topic_create(actor=principal.name, name=name, biz=biz, settings=data, groups=groups)
        return Response(topic_out(topic), status=status.HTTP_201_CREATED)


class TopicDetailView(APIView):
    def get_permissions(self):  # type: ignore[no-untyped-def]
        # Consumers read a topic's settings (group modes) with a consume scope.
        if self.request.method == "GET":
            return super().get_permissions()
        return [IsAdminToken()]

    def _topic(self, principal: Principal, name: str, *, admin: bool) -> Topic:
        topic = services.topic_get(name)
        services.topic_require_biz(principal, topic)
        if not admin and not (principal.may("consume", name) or principal.may("produce", name)):
            raise Forbidden(f"This token has no scope for topic {name!r}.")
        return topic

    @extend_schema(operation_id="topic_detail", responses={200: TopicSerializer, **ERRORS})
    def get(self, request: Request, topic: str) -> Response:
        # Webhook URLs carry their chat tool's posting credential: produce and consume
        # tokens read them masked.
        row = self._topic(request.user, topic, admin=False)
        return Response(topic_out(row, secrets=request.user.is_admin))

    @extend_schema(
        operation_id="topic_update", request=TopicUpdateSerializer, responses={200: TopicSerializer, **ERRORS}
    )
    def patch(self, request: Request, topic: str) -> Response:
        row = self._topic(request.user, topic, admin=True)
        data = _valid(TopicUpdateSerializer, request.data, partial=True)
        if data.pop("topic", topic) != topic:
            raise InvalidRequest("A topic's name cannot change.", details={"field": "topic"})
        biz = _biz_for(request.user, data.pop("biz", None))
        groups = data.pop("groups", None)
        updated = services.topic_update(actor=request.user.name, topic=row, settings=data, biz=biz, groups=groups)
        return Response(topic_out(updated))

    @extend_schema(operation_id="topic_delete", responses={204: None, 202: PurgeJobSerializer, **ERRORS})
    def delete(self, request: Request, topic: str) -> Response:
        job = topic_remove(principal=request.user, topic=self._topic(request.user, topic, admin=True))
        if job is not None:  # too large to purge within the call: a job does it
            return Response({"job": job.id, "topic": topic}, status=status.HTTP_202_ACCEPTED)
        return Response(status=status.HTTP_204_NO_CONTENT)
