"""The OpenAPI document's examples and links (mqcenter/openapi.py adds them): API.md's
requests, and from each answer that creates or returns ids the operations taking them, so
that a generated client or a stateful tester can follow them."""

from __future__ import annotations

from typing import Any


def _link(operation_id: str, parameters: dict[str, str] | None = None, body: Any = None) -> dict[str, Any]:
    link: dict[str, Any] = {"operationId": operation_id}
    if parameters:
        link["parameters"] = parameters
    if body is not None:
        link["requestBody"] = body
    return link


MESSAGE_ID = "$response.body#/messages/0/id"
# (path, method, status) -> links of that answer, to the operations taking what it returns.
LINKS: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = {
    ("/api/v1/messages", "post", "201"): {
        "MessageDetail": _link("message_detail", {"message_id": MESSAGE_ID}),
        "MessageEdit": _link("message_edit", {"message_id": MESSAGE_ID}),
        "MessageCancel": _link("message_cancel", {"message_id": MESSAGE_ID}),
        "MessageDelete": _link("message_delete", {"message_id": MESSAGE_ID}),
        "TransactionDetail": _link("transaction_detail", {"transaction_id": "$response.body#/transaction_id"}),
        "TransactionCommit": _link("transaction_commit", {"transaction_id": "$response.body#/transaction_id"}),
        "TransactionRollback": _link("transaction_rollback", {"transaction_id": "$response.body#/transaction_id"}),
    },
    ("/api/v1/pull", "post", "200"): {
        "Ack": _link("ack", body={"consumer": "$request.body#/consumer",
                                  "results": [{"id": MESSAGE_ID, "status": "SUCCESS"}]}),
        "Extend": _link("extend", body={"consumer": "$request.body#/consumer", "ids": [MESSAGE_ID]}),
        "Release": _link("release", body={"consumer": "$request.body#/consumer", "ids": [MESSAGE_ID]}),
        "MessageDetail": _link("message_detail", {"message_id": MESSAGE_ID}),
    },
    ("/api/v1/topics", "post", "201"): {
        name: _link(op, {"topic": "$response.body#/topic"})
        for name, op in (("TopicDetail", "topic_detail"), ("TopicUpdate", "topic_update"),
                         ("TopicDelete", "topic_delete"), ("GroupList", "group_list"), ("GroupCreate", "group_create"))
    },
    ("/api/v1/topics/{topic}/groups", "post", "201"): {
        name: _link(op, {"topic": "$response.body#/topic", "group": "$response.body#/group"})
        for name, op in (("GroupDetail", "group_detail"), ("GroupUpdate", "group_update"),
                         ("GroupDelete", "group_delete"), ("GroupReplay", "group_replay"))
    },
    ("/api/v1/schedules", "post", "201"): {
        name: _link(op, {"schedule_id": "$response.body#/id"})
        for name, op in (("ScheduleDetail", "schedule_detail"), ("ScheduleUpdate", "schedule_update"),
                         ("ScheduleDelete", "schedule_delete"), ("ScheduleRun", "schedule_run"))
    },
    ("/api/v1/biz", "post", "201"): {
        name: _link(op, {"biz_id": "$response.body#/id"})
        for name, op in (("BizDetail", "biz_detail"), ("BizUpdate", "biz_update"), ("BizDelete", "biz_delete"))
    },
    ("/api/v1/registry/consumers", "post", "200"): {
        "Leave": _link("registry_leave", {"consumer": "$request.body#/consumer"}),
    },
    ("/api/v1/archive/messages", "get", "200"): {
        "ArchiveDetail": _link("archive_detail", {"archived_id": MESSAGE_ID}),
    },
    ("/api/v1/messages", "get", "200"): {
        "MessageDetail": _link("message_detail", {"message_id": MESSAGE_ID}),
    },
    **{
        (path, "post", "202"): {"Job": _link("job_detail", {"job_id": "$response.body#/job"})}
        for path in ("/api/v1/messages/redrive", "/api/v1/messages/requeue", "/api/v1/messages/delete",
                     "/api/v1/messages/cancel", "/api/v1/messages/move", "/api/v1/archive/messages/redrive",
                     "/api/v1/topics/{topic}/groups")
    },
}


# Examples of the main requests (API.md's).
EXAMPLES: dict[str, Any] = {
    "ProduceRequestRequest": {"messages": [{
        "topic": "orders", "data": {"order": 42}, "group": "billing", "key": "customer-7", "delay_seconds": 30,
        "retry_count": 3, "timeout_seconds": 60, "dedup_key": "order-42-created", "headers": {"trace": "abc"}}]},
    "ProduceResponse": {"messages": [{"id": 1017, "topic": "orders", "group": "billing", "status": "NEW",
                                      "duplicate": False}]},
    "PullRequestRequest": {"topic": "orders", "group": "billing", "consumer": "host-a:4711:3f2c",
                           "max_messages": 100, "wait_seconds": 20},
    "AckRequestRequest": {"consumer": "host-a:4711:3f2c", "results": [
        {"id": 1017, "status": "SUCCESS", "log": "charged"}, {"id": 1018, "status": "FAIL", "log": "card declined"},
        {"id": 1019, "status": "RETRY", "delay_seconds": 30}]},
    "AckResponse": {"results": [{"id": 1017, "outcome": "success"},
                                {"id": 1018, "outcome": "retry_scheduled", "effect_time": "2026-11-27T08:00:30Z"}]},
    "ExtendRequestRequest": {"consumer": "host-a:4711:3f2c", "ids": [1017], "seconds": 60},
    "ReleaseRequestRequest": {"consumer": "host-a:4711:3f2c", "ids": [1019]},
    "HeartbeatRequest": {"consumer": "host-a:4711:3f2c", "subscriptions": [{"topic": "orders", "group": "billing"}]},
    "TopicRequest": {"topic": "orders", "description": "order events", "retry_count": 3,
                     "retry_strategy": "exponential", "retry_interval_seconds": 10, "timeout_seconds": 60,
                     "retention_days": 7, "groups": [{"group": "billing", "mode": "queue"}]},
    "GroupCreateRequest": {"group": "audit", "mode": "queue", "start": "latest"},
    "ScheduleRequest": {"name": "nightly-sync", "topic": "sync", "data": {"full": True}, "cron": "0 2 * * *",
                        "timezone": "Asia/Shanghai", "enabled": True},
    "BulkRequestRequest": {"filter": {"topic": "orders", "status": ["FAIL", "TIMEOUT"]}},
    "Error": {"error": {"code": "invalid_request", "message": "messages[3].data: is required.",
                        "details": {"field": "messages[3].data"}}},
}
