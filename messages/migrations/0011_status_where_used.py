"""On MySQL and MariaDB, `ix_msg_key` and `ix_msg_expiry` hold a generated column in place of
`status`: `key_status`, a message's status when it has a key (NULL without one), and
`expiry_status`, its status when it has an expiry. A claim or an ack then rewrites their
entries only for messages that have a key or an expiry, not for every message (docs/
benchmarks.md, "Indexes and status changes"). The columns are virtual, so adding them does
not copy the table, and the indexes are built online. PostgreSQL and SQLite keep the two
indexes as the model declares them; the model does not know the columns
(messages/delivery/sql.py reads them on MySQL only)."""

from django.db import migrations

FORWARD = [
    "ALTER TABLE mq_message"
    " ADD COLUMN key_status varchar(16) AS (CASE WHEN msg_key IS NULL THEN NULL ELSE status END) VIRTUAL,"
    " ADD COLUMN expiry_status varchar(16) AS (CASE WHEN expires_at IS NULL THEN NULL ELSE status END) VIRTUAL",
    "DROP INDEX ix_msg_key ON mq_message",
    "CREATE INDEX ix_msg_key ON mq_message (msg_key, topic, group_name, key_status)",
    "DROP INDEX ix_msg_expiry ON mq_message",
    "CREATE INDEX ix_msg_expiry ON mq_message (expiry_status, expires_at)",
]
BACKWARD = [
    "DROP INDEX ix_msg_key ON mq_message",
    "CREATE INDEX ix_msg_key ON mq_message (msg_key, topic, group_name, status)",
    "DROP INDEX ix_msg_expiry ON mq_message",
    "CREATE INDEX ix_msg_expiry ON mq_message (status, expires_at)",
    "ALTER TABLE mq_message DROP COLUMN key_status, DROP COLUMN expiry_status",
]


def _on_mysql(statements):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "mysql":
            for statement in statements:
                schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):

    dependencies = [
        ("mq_messages", "0010_row_acks"),
    ]

    operations = [
        # DDL outside a transaction: MySQL cannot roll it back (RunPython is atomic by default).
        migrations.RunPython(_on_mysql(FORWARD), _on_mysql(BACKWARD), atomic=False),
    ]
