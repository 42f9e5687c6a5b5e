"""The topic row's lock, which orders publishes against group creation and deletion."""

from __future__ import annotations

from django.db import connection


def lock_topic(topic_pk: int, *, share: bool) -> int | None:
    """Lock a topic's row for the caller's transaction. A publish holds it shared while it
    reads the topic's groups and stores their copies; creating or deleting a group holds it
    exclusively. So a group exists either before a publish (and gets its copy) or after it
    (and a replay sees the publish committed): no publish is half-copied to a new group.
    Group rows are not locked: claims lock those.

    The exclusive lock is taken by adding one to the topic's `subscriptions_version`, as
    every change of its subscriptions happens under it; the shared lock answers that count
    (None for a topic row that is gone), so a publish can tell whether the subscriptions it
    read before are still the topic's (messages/routing/filters.py)."""
    table = connection.ops.quote_name("topics_topic")
    with connection.cursor() as cursor:
        if not share:
            cursor.execute(
                f"UPDATE {table} SET subscriptions_version = subscriptions_version + 1 WHERE id = %s",  # noqa: S608 - a quoted table name
                [topic_pk],
            )
            return None
        if not connection.features.has_select_for_update:
            mode = ""  # SQLite: writers queue for the database
        else:
            mode = "LOCK IN SHARE MODE" if connection.vendor == "mysql" else "FOR SHARE"
        cursor.execute(f"SELECT subscriptions_version FROM {table} WHERE id = %s {mode}", [topic_pk])  # noqa: S608 - a quoted table name
        row = cursor.fetchone()
    return None if row is None else int(row[0])
