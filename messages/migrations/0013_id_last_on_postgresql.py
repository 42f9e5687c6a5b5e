"""`ix_msg_priority`, `ix_msg_fair` and `ix_msg_finished` end with `id`, the order their
readers take after the indexed columns (claims, a fair key's oldest rows, the stats flush's
successes). InnoDB and SQLite already hold the primary key at the end of every index entry,
so on them this changes the model only. On PostgreSQL the new indexes are built under
temporary names while the old ones serve (writes wait for the builds, reads go on), then
take the old ones' names; a claim on a deep backlog then reads its rows along the index
instead of sorting every due row of the group."""

from django.db import migrations, models

WITHOUT_ID = {
    "ix_msg_priority": ["topic", "group_name", "status", "-priority", "effect_time"],
    "ix_msg_fair": ["topic", "group_name", "status", "key", "effect_time"],
    "ix_msg_finished": ["status", "update_time"],
}
WITH_ID = {name: [*fields, "id"] for name, fields in WITHOUT_ID.items()}


def _replace(apps, schema_editor, old: dict[str, list[str]], new: dict[str, list[str]]) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    message = apps.get_model("mq_messages", "Message")
    for name, fields in new.items():
        schema_editor.add_index(message, models.Index(fields=fields, name=f"{name}_new"))
    for name, fields in old.items():
        schema_editor.remove_index(message, models.Index(fields=fields, name=name))
        schema_editor.rename_index(message, models.Index(fields=new[name], name=f"{name}_new"),
                                   models.Index(fields=new[name], name=name))


def id_last(apps, schema_editor) -> None:
    _replace(apps, schema_editor, WITHOUT_ID, WITH_ID)


def id_implicit(apps, schema_editor) -> None:
    _replace(apps, schema_editor, WITH_ID, WITHOUT_ID)


class Migration(migrations.Migration):

    dependencies = [
        ("mq_messages", "0012_one_claim_index"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                operation
                for name, fields in WITH_ID.items()
                for operation in (
                    migrations.RemoveIndex(model_name="message", name=name),
                    migrations.AddIndex(model_name="message", index=models.Index(fields=fields, name=name)),
                )
            ],
            database_operations=[migrations.RunPython(id_last, id_implicit)],
        ),
    ]
