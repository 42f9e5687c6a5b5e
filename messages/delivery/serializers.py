"""OpenAPI descriptions of the hot path's requests and answers (produce, pull, ack, extend,
release). The doors parse with messages/delivery/validation.py and answer with
messages/delivery/answers.py; these classes exist so `/api/schema/` documents exactly those
shapes."""

from __future__ import annotations

from rest_framework import serializers

from messages.delivery.validation import NAME_PATTERN


class ProduceMessageSerializer(serializers.Serializer):
    topic = serializers.RegexField(NAME_PATTERN, max_length=200)
    data = serializers.JSONField(help_text="Any JSON value; at most 256 KiB serialized.")
    group = serializers.RegexField(NAME_PATTERN, max_length=200, required=False, allow_null=True)
    key = serializers.CharField(max_length=128, required=False, allow_null=True)
    headers = serializers.DictField(child=serializers.CharField(max_length=1024), required=False, allow_null=True)
    delay_seconds = serializers.FloatField(min_value=0, max_value=365 * 86400, required=False, allow_null=True)
    effect_time = serializers.DateTimeField(required=False, allow_null=True)
    retry_count = serializers.IntegerField(min_value=0, max_value=1000, required=False, allow_null=True)
    timeout_seconds = serializers.IntegerField(min_value=1, max_value=7 * 86400, required=False, allow_null=True)
    dedup_key = serializers.CharField(max_length=200, required=False, allow_null=True)
    dedup_seconds = serializers.IntegerField(
        min_value=1, max_value=30 * 86400, required=False, allow_null=True,
        help_text="dedup_key is unique this long from the first produce, then free again.",
    )
    dedup_conflict = serializers.ChoiceField(
        choices=["first", "reject"], required=False, allow_null=True,
        help_text="first: a duplicate answers the first message (duplicate: true); reject: 409 duplicate.",
    )
    reply_to = serializers.RegexField(
        NAME_PATTERN, max_length=200, required=False, allow_null=True,
        help_text="The topic a reply goes to (headers mq-reply-to); a correlation_id is made up when none is given.",
    )
    correlation_id = serializers.CharField(max_length=128, required=False, allow_null=True)
    tag = serializers.RegexField(
        r"^[A-Za-z0-9_.:-]{1,64}$", required=False, allow_null=True,
        help_text="What subscription filters select on: a publish is copied only to the groups whose filter matches.",
    )
    broadcast = serializers.BooleanField(required=False, default=False)
    ttl_seconds = serializers.FloatField(
        min_value=0, required=False, allow_null=True, help_text="Not delivered within this: EXPIRED."
    )
    expires_at = serializers.DateTimeField(
        required=False, allow_null=True, help_text="Not delivered by then: EXPIRED (a dead letter)."
    )
    priority = serializers.IntegerField(
        min_value=0, max_value=9, required=False, default=4,
        help_text="Queue groups deliver higher priorities first; serial and sharded groups keep id order.",
    )


class ProduceRequestSerializer(serializers.Serializer):
    messages = ProduceMessageSerializer(many=True)


class ProducedSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    topic = serializers.CharField()
    group = serializers.CharField()
    status = serializers.CharField()
    duplicate = serializers.BooleanField()
    correlation_id = serializers.CharField(
        required=False, allow_null=True, help_text="Answered when the call named reply_to or correlation_id."
    )
    item = serializers.IntegerField(
        required=False,
        help_text="The request's item this is a copy of; answered when a topic of the call has filtered groups.",
    )


class ProduceResponseSerializer(serializers.Serializer):
    messages = ProducedSerializer(many=True)


class AckItemSerializer(serializers.Serializer):
    id = serializers.IntegerField(min_value=1)
    status = serializers.ChoiceField(choices=["SUCCESS", "FAIL", "RETRY"])
    log = serializers.CharField(required=False, allow_blank=True, allow_null=True, max_length=65536)
    delay_seconds = serializers.FloatField(
        min_value=0, required=False, allow_null=True,
        help_text="With status RETRY (required): deliver again after this many seconds, spending no retry "
        "(at most MQ_MAX_SNOOZE_SECONDS).",
    )
    retry = serializers.BooleanField(
        required=False, default=True, help_text="false: fail permanently, spend no retry (extension)."
    )


class AckOutcomeSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    outcome = serializers.ChoiceField(choices=["success", "retry_scheduled", "failed", "stale"])
    effect_time = serializers.DateTimeField(required=False)


class PullRequestSerializer(serializers.Serializer):
    topic = serializers.RegexField(NAME_PATTERN, max_length=200)
    group = serializers.RegexField(NAME_PATTERN, max_length=200, required=False, default="default")
    consumer = serializers.RegexField(r"^[A-Za-z0-9_.:@/\-]{1,200}$")
    max_messages = serializers.IntegerField(min_value=1, max_value=500, required=False, default=1)
    wait_seconds = serializers.FloatField(min_value=0, max_value=30, required=False, default=0)
    results = AckItemSerializer(
        many=True, required=False,
        help_text="Acks applied before the claim, as POST /api/v1/ack takes them (extension).",
    )


class DeliverySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    topic = serializers.CharField()
    group = serializers.CharField()
    data = serializers.JSONField()
    key = serializers.CharField(allow_null=True)
    tag = serializers.CharField(allow_null=True)
    headers = serializers.DictField(child=serializers.CharField())
    reply_to = serializers.CharField(allow_null=True)
    correlation_id = serializers.CharField(allow_null=True)
    attempt = serializers.IntegerField()
    retry_remaining = serializers.IntegerField()
    timeout_seconds = serializers.IntegerField()
    effect_time = serializers.DateTimeField()
    add_time = serializers.DateTimeField()
    lease_expires_at = serializers.DateTimeField()


class PullResponseSerializer(serializers.Serializer):
    messages = DeliverySerializer(many=True)
    results = AckOutcomeSerializer(
        many=True, required=False, help_text="The outcomes of the acks the pull carried (extension)."
    )


class AckRequestSerializer(serializers.Serializer):
    consumer = serializers.RegexField(r"^[A-Za-z0-9_.:@/\-]{1,200}$")
    results = AckItemSerializer(many=True)


class AckResponseSerializer(serializers.Serializer):
    results = AckOutcomeSerializer(many=True)


class ExtendRequestSerializer(serializers.Serializer):
    consumer = serializers.RegexField(r"^[A-Za-z0-9_.:@/\-]{1,200}$")
    ids = serializers.ListField(child=serializers.IntegerField(min_value=1), min_length=1, max_length=1000)
    seconds = serializers.IntegerField(min_value=1, max_value=43200, required=False, default=60)


class ExtendOutcomeSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    lease_expires_at = serializers.DateTimeField(required=False)
    outcome = serializers.CharField(required=False)


class ExtendResponseSerializer(serializers.Serializer):
    results = ExtendOutcomeSerializer(many=True)


class ReleaseRequestSerializer(serializers.Serializer):
    consumer = serializers.RegexField(r"^[A-Za-z0-9_.:@/\-]{1,200}$")
    ids = serializers.ListField(child=serializers.IntegerField(min_value=1), min_length=1, max_length=1000)
