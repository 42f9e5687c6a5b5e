"""Reads of the archive: one archived message within the caller's reach, and search."""

from __future__ import annotations

from messages.archive.models import MessageArchive
from messages.filters import MessageFilter
from messages.keyset import PAGE_SIZE, keyset_page
from mqcenter.core.auth import Principal
from mqcenter.core.errors import NotFound
from topics.models import Topic
from topics.services import topic_is_deleting


def archive_get(*, principal: Principal, message_id: int) -> MessageArchive:
    """An archived message the principal may see (NotFound otherwise, as for live ones)."""
    message = MessageArchive.objects.filter(id=message_id).first()
    if message is None:
        raise NotFound(f"Message {message_id} does not exist.", details={"id": message_id})
    topic = Topic.objects.filter(name=message.topic).first()
    if topic is None:
        hidden = principal.biz_ids is not None or topic_is_deleting(message.topic)
    else:
        hidden = not principal.may_biz(topic.biz_id)
    if hidden:
        raise NotFound(f"Message {message_id} does not exist.", details={"id": message_id})
    return message


def archive_search(
    *, principal: Principal, filter: MessageFilter, cursor: str | None = None, limit: int = PAGE_SIZE
) -> tuple[list[MessageArchive], str | None]:
    """Search archived messages with the same filter and keyset pagination as live ones."""
    return keyset_page(filter.queryset(principal, model=MessageArchive), cursor, limit)
