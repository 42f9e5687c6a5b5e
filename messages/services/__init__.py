"""Every write and business rule about messages. Views, tasks and consumers call these."""

from messages.services.acks import (
    AckResult,
    acks_before_pull,
    messages_ack,
    messages_extend,
    messages_release,
)
from messages.services.alarms import alarms_check
from messages.services.archive import (
    archive_export,
    archive_purge,
    maintenance_cleanup,
    messages_archive,
)
from messages.services.claims import messages_claim
from messages.services.lifecycle import leases_recover
from messages.services.operations import (
    bulk_job_create,
    bulk_job_get,
    bulk_job_run,
    data_text,
    message_add,
    message_cancel,
    message_edit,
    message_get,
    messages_cancel,
    messages_delete,
    messages_requeue,
)
from messages.services.produce import ProduceItem, ProduceResult, messages_produce
from messages.services.pull import messages_pull
from messages.services.runs import maintenance_run
from messages.services.stats import stats_flush

__all__ = [
    "AckResult",
    "ProduceItem",
    "ProduceResult",
    "acks_before_pull",
    "alarms_check",
    "archive_export",
    "archive_purge",
    "bulk_job_create",
    "bulk_job_get",
    "bulk_job_run",
    "data_text",
    "leases_recover",
    "maintenance_cleanup",
    "maintenance_run",
    "message_add",
    "message_cancel",
    "message_edit",
    "message_get",
    "messages_ack",
    "messages_archive",
    "messages_cancel",
    "messages_claim",
    "messages_delete",
    "messages_extend",
    "messages_produce",
    "messages_pull",
    "messages_release",
    "messages_requeue",
    "stats_flush",
]
