"""Every write and business rule about messages. Views, tasks and consumers call these."""

from messages.services.acks import AckResult, messages_ack, messages_extend, messages_release
from messages.services.delivery import leases_recover, messages_claim, messages_pull
from messages.services.operations import (
    bulk_job_create,
    bulk_job_get,
    bulk_job_run,
    data_text,
    message_edit,
    message_get,
    messages_delete,
    messages_requeue,
)
from messages.services.produce import ProduceItem, ProduceResult, messages_produce

__all__ = [
    "AckResult",
    "ProduceItem",
    "ProduceResult",
    "bulk_job_create",
    "bulk_job_get",
    "bulk_job_run",
    "data_text",
    "leases_recover",
    "message_edit",
    "message_get",
    "messages_ack",
    "messages_claim",
    "messages_delete",
    "messages_extend",
    "messages_produce",
    "messages_pull",
    "messages_release",
    "messages_requeue",
]
