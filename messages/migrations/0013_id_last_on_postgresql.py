"""`ix_msg_priority`, `ix_msg_fair` and `ix_msg_finished` end with `id`, the order their
readers take after the indexed columns (claims, a fair key's oldest rows, the stats flush's
successes). InnoDB and SQLite already hold the primary key at the end of every index entry,
so on them this changes the model only; on PostgreSQL each index is rebuilt (the table's
writes wait while it is built), and a claim on a deep backlog reads its 100 rows along the
index instead of sorting every due row of the group."""

from django.db import migrations, models

OLD = {
    "ix_msg_priority": ["topic", "group_name", "status", "-priority", "effect_time"],
    "ix_msg_fair": ["topic", "group_name", "status", "key", "effect_time"],
    "ix_msg_finished": ["status", "update_time"],
}


def _swap(apps, schema_editor, *, forwards: bool) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    message = apps.get_model("mq_messages", "Message")
    for name, fields in OLD.items():
        old, new = models.Index(fields=fields, name=name), models.Index(fields=[*fields, "id"], name=name)
        schema_editor.remove_index(message, new if not forwards else old)
        schema_editor.add_index(message, old if not forwards else new)


def id_last(apps, schema_editor) -> None:
    _swap(apps, schema_editor, forwards=True)


def id_implicit(apps, schema_editor) -> None:
    _swap(apps, schema_editor, forwards=False)


class Migration(migrations.Migration):

    dependencies = [
        ("mq_messages", "0012_one_claim_index"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                operation
                for name, fields in OLD.items()
                for operation in (
                    migrations.RemoveIndex(model_name="message", name=name),
                    migrations.AddIndex(model_name="message", index=models.Index(fields=[*fields, "id"], name=name)),
                )
            ],
            database_operations=[migrations.RunPython(id_last, id_implicit)],
        ),
    ]
