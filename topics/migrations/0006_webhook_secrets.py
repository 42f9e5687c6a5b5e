"""Every alarm webhook target has its own signing secret: targets stored before posts were
signed get one, so their posts are signed like any other's (the secret is shown to the
topic's admins on the topic page, where a receiver's owner copies it)."""

import secrets

from django.db import migrations


def secrets_give(apps, schema_editor):  # type: ignore[no-untyped-def]
    Topic = apps.get_model("topics", "Topic")
    for topic in Topic.objects.exclude(alarm_webhooks=[]).only("id", "alarm_webhooks"):
        targets = topic.alarm_webhooks or []
        if all(isinstance(t, dict) and t.get("secret") for t in targets):
            continue
        # The format of topics/webhooks.py `webhook_secret_new`, written out: a migration
        # keeps the code it ran with.
        topic.alarm_webhooks = [
            t if not isinstance(t, dict) or t.get("secret") else {**t, "secret": f"whsec_{secrets.token_urlsafe(32)}"}
            for t in targets
        ]
        topic.save(update_fields=["alarm_webhooks"])


class Migration(migrations.Migration):
    dependencies = [
        ("topics", "0005_fair_keys"),
    ]

    operations = [
        migrations.RunPython(secrets_give, migrations.RunPython.noop),
    ]
