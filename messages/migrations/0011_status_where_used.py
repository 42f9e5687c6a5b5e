"""On MySQL and MariaDB, `ix_msg_key` and `ix_msg_expiry` hold a generated column in place of
`status`: `key_status`, a message's status when it has a key (NULL without one), and
`expiry_status`, its status when it has an expiry. A claim or an ack then rewrites their
entries only for messages that have a key or an expiry, not for every message (docs/
benchmarks.md, "Indexes and status changes"). PostgreSQL and SQLite keep the two indexes as
the model declares them; the model does not know the columns (messages/delivery/sql.py reads
them on MySQL only).

Two statements, each atomic: the columns (virtual: added without copying the table; skipped
when a run that failed after it added them is repeated), then both indexes swapped in one
ALTER, built online while the old ones still serve."""

from django.db import migrations

COLUMNS = (
    "ALTER TABLE mq_message"
    " ADD COLUMN key_status varchar(16) AS (CASE WHEN msg_key IS NULL THEN NULL ELSE status END) VIRTUAL,"
    " ADD COLUMN expiry_status varchar(16) AS (CASE WHEN expires_at IS NULL THEN NULL ELSE status END) VIRTUAL"
)
INDEXES_GENERATED = (
    "ALTER TABLE mq_message"
    " DROP INDEX ix_msg_key, ADD INDEX ix_msg_key (msg_key, topic, group_name, key_status),"
    " DROP INDEX ix_msg_expiry, ADD INDEX ix_msg_expiry (expiry_status, expires_at)"
)
INDEXES_STATUS = (
    "ALTER TABLE mq_message"
    " DROP INDEX ix_msg_key, ADD INDEX ix_msg_key (msg_key, topic, group_name, status),"
    " DROP INDEX ix_msg_expiry, ADD INDEX ix_msg_expiry (status, expires_at)"
)
DROP_COLUMNS = "ALTER TABLE mq_message DROP COLUMN key_status, DROP COLUMN expiry_status"


def _has_columns(schema_editor) -> bool:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE()"
            " AND table_name = 'mq_message' AND column_name IN ('key_status', 'expiry_status')"
        )
        return cursor.fetchone()[0] == 2


def forward(apps, schema_editor):
    if schema_editor.connection.vendor != "mysql":
        return
    if not _has_columns(schema_editor):
        schema_editor.execute(COLUMNS)
    schema_editor.execute(INDEXES_GENERATED)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor != "mysql":
        return
    schema_editor.execute(INDEXES_STATUS)
    if _has_columns(schema_editor):
        schema_editor.execute(DROP_COLUMNS)


class Migration(migrations.Migration):

    dependencies = [
        ("mq_messages", "0010_row_acks"),
    ]

    operations = [
        # DDL outside a transaction: MySQL cannot roll it back (RunPython is atomic by default).
        migrations.RunPython(forward, backward, atomic=False),
    ]
