"""The topic row's lock, which orders publishes against group creation and deletion."""

from __future__ import annotations

from django.db import connection

from topics.models import subscriptions_version_new


def lock_topic(topic_pk: int, *, share: bool) -> int | None:
    """Lock a topic's row for the caller's transaction. A publish holds it shared while it
    reads the topic's groups and stores their copies; creating or deleting a group holds it
    exclusively. So a group exists either before a publish (and gets its copy) or after it
    (and a replay sees the publish committed): no publish is half-copied to a new group.
    Group rows are not locked: claims lock those.

    The exclusive lock also gives the topic a new `subscriptions_version`, as every change of
    its subscriptions happens under it; the shared lock answers that value (None for a topic
    row that is gone), so a publish can tell whether the subscriptions it read before are
    still the topic's (messages/routing/filters.py)."""
    table = connection.ops.quote_name("topics_topic")
    with connection.cursor() as cursor:
        if not share:
            if connection.features.has_select_for_update:
                # FOR UPDATE first, as an UPDATE's lock on PostgreSQL lets a foreign-key check
                # (a group row inserted meanwhile) through: group_create must wait for it.
                cursor.execute(f"SELECT id FROM {table} WHERE id = %s FOR UPDATE", [topic_pk])  # noqa: S608 - a quoted table name
            cursor.execute(
                f"UPDATE {table} SET subscriptions_version = %s WHERE id = %s",  # noqa: S608 - a quoted table name
                [subscriptions_version_new(), topic_pk],
            )
            return None
        if not connection.features.has_select_for_update:
            mode = ""  # SQLite: writers queue for the database
        else:
            mode = "LOCK IN SHARE MODE" if connection.vendor == "mysql" else "FOR SHARE"
        cursor.execute(f"SELECT subscriptions_version FROM {table} WHERE id = %s {mode}", [topic_pk])  # noqa: S608 - a quoted table name
        row = cursor.fetchone()
    return None if row is None else int(row[0])
