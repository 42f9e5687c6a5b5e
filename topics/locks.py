"""The topic row's lock, which orders publishes against group creation and deletion."""

from __future__ import annotations

from django.db import connection


def lock_topic(topic_pk: int, *, share: bool) -> None:
    """Lock a topic's row for the caller's transaction. A publish holds it shared while it
    reads the topic's groups and stores their copies; creating or deleting a group holds it
    exclusively. So a group exists either before a publish (and gets its copy) or after it
    (and a replay sees the publish committed): no publish is half-copied to a new group.
    Group rows are not locked: claims lock those."""
    if not connection.features.has_select_for_update:
        return  # SQLite: writers queue for the database
    table = connection.ops.quote_name("topics_topic")
    shared = "LOCK IN SHARE MODE" if connection.vendor == "mysql" else "FOR SHARE"
    mode = shared if share else "FOR UPDATE"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id FROM {table} WHERE id = %s {mode}", [topic_pk])  # noqa: S608 - a quoted table name

