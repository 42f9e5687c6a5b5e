"""Put finished messages into the archive with the archive job's own batch (the same SQL
copy, trace and delete as `messages_archive`)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from messages.archive.models import MessageArchive
from messages.archive.services import _archive_batch
from messages.models import FINISHED_STATUSES, Message, MessageTrace


def archive_messages(ids: list[int], *, days: int = 400) -> None:
    """Age these finished messages past any retention and archive them. The job's batch is
    called per topic without the run's id bound (which assumes ids grow with add_time, and
    these messages were aged after later ones were added)."""
    rows = Message.objects.filter(id__in=ids)
    assert set(rows.values_list("status", flat=True)) <= set(FINISHED_STATUSES)
    past = timezone.now() - timedelta(days=days)
    rows.update(update_time=past, add_time=past)
    rows.filter(pulled_at__isnull=False).update(pulled_at=past)
    MessageTrace.objects.filter(message_id__in=ids).update(at=past)
    cutoff = past + timedelta(seconds=1)
    for topic in sorted(set(Message.objects.filter(id__in=ids).values_list("topic", flat=True))):
        _archive_batch(
            topic=topic, cutoff=cutoff, after=0, before=None, batch=10_000, retention_days=days
        )
    assert set(MessageArchive.objects.filter(id__in=ids).values_list("id", flat=True)) == set(ids)
