"""Alarm webhook targets stored without a signing secret get one from the migration
topics/0006_webhook_secrets, so their posts are signed; targets that have one keep it."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps

from topics.models import Biz, Topic

pytestmark = pytest.mark.django_db

migration = importlib.import_module("topics.migrations.0006_webhook_secrets")


def test_targets_without_a_secret_get_their_own_and_the_others_keep_theirs() -> None:
    biz = Biz.objects.create(name="shop")
    old = Topic.objects.create(name="orders", biz=biz, alarm_webhooks=[
        {"url": "https://hooks.example.com/a", "format": "generic"},
        {"url": "https://hooks.example.com/b", "format": "slack", "secret": "whsec_kept"},
        {"url": "https://hooks.example.com/c", "format": "generic", "secret": ""},
    ])
    none = Topic.objects.create(name="plain", biz=biz)

    migration.secrets_give(apps, None)

    targets = Topic.objects.get(pk=old.pk).alarm_webhooks
    assert [t["url"] for t in targets] == [f"https://hooks.example.com/{x}" for x in "abc"]
    assert targets[1]["secret"] == "whsec_kept"
    new = [targets[0]["secret"], targets[2]["secret"]]
    assert all(s.startswith("whsec_") and len(s) > 40 for s in new) and new[0] != new[1]
    assert Topic.objects.get(pk=none.pk).alarm_webhooks == []
    migration.secrets_give(apps, None)  # a second run changes nothing
    assert Topic.objects.get(pk=old.pk).alarm_webhooks == targets
