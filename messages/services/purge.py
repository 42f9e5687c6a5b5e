"""Deleting a topic leaves nothing of it behind.

Another business line may create a topic of the same name later (by admin API, or by produce
with auto-creation): everything the old topic held (finished messages in the live table, the
archive, their trace rows, stats buckets, alarms, consumer registrations, the Parquet export)
is removed first, so nothing of it is ever visible by that name again.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from django.conf import settings
from django.db import transaction

from messages.models import Alarm, Message, MessageArchive, MessageTrace, StatsBucket
from registry.models import ConsumerInstance
from topics.models import Topic
from topics.services import topic_delete, topic_require_drained

# Messages removed per transaction: a large topic holds no long locks.
PURGE_BATCH = 1000


def topic_remove(*, actor: str, topic: Topic) -> int:
    """Delete `topic` and everything of it (see the module). Refused (409) while it has live
    messages, as `topic_delete`. The rows go before the topic row: while they go, the name
    still belongs to its owner, so no other business line can claim it and see them. Returns
    how many messages were removed."""
    topic_require_drained(topic=topic)
    removed = messages_purge(topic=topic.name)
    StatsBucket.objects.filter(topic=topic.name).delete()
    Alarm.objects.filter(topic=topic.name).delete()
    ConsumerInstance.objects.filter(topic=topic.name).delete()
    _export_purge(topic.name)
    topic_delete(actor=actor, topic=topic)
    return removed


def messages_purge(*, topic: str, batch: int = PURGE_BATCH) -> int:
    """Remove every message of `topic` from the live table and the archive, with its trace,
    `batch` messages per transaction. Returns how many were removed."""
    removed = 0
    for model in (Message, MessageArchive):
        while ids := list(model.objects.filter(topic=topic).order_by("id").values_list("id", flat=True)[:batch]):
            with transaction.atomic():
                MessageTrace.objects.filter(message_id__in=ids).delete()
                model.objects.filter(id__in=ids).delete()
            removed += len(ids)
    return removed


def _export_purge(topic: str) -> None:
    """The topic's folders of the Parquet export (`<kind>/day=.../topic=<name>`)."""
    if not settings.MQ_ARCHIVE_PARQUET_DIR:
        return
    root = Path(settings.MQ_ARCHIVE_PARQUET_DIR)
    for kind in ("messages", "traces"):
        for folder in (root / kind).glob(f"day=*/topic={topic}"):
            shutil.rmtree(folder, ignore_errors=True)
