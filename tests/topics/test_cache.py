"""The per-process caches and the named rows of the hot path."""

from __future__ import annotations

import pytest
from django.db import transaction

from messages.delivery.sql_insert import NewMessage
from messages.delivery.trace import TraceRow
from messages.models import Message, MessageTrace
from topics.cache import topic_cache
from topics.models import Topic, TopicGroup


def test_the_hot_path_rows_name_columns_of_their_tables():
    assert set(NewMessage._fields) <= {f.attname for f in Message._meta.concrete_fields}
    assert set(TraceRow._fields) <= {f.attname for f in MessageTrace._meta.concrete_fields}


@pytest.mark.django_db(transaction=True)
def test_it_remembers_a_topic_until_this_process_changes_it(django_assert_num_queries):
    topic = Topic.objects.create(name="cached", retry_count=1)
    TopicGroup.objects.create(topic=topic, name="billing")
    topic_cache.forget()
    first = topic_cache.get("cached")
    assert first.retry_count == 1 and set(first.group_rows) == {"billing"}
    with django_assert_num_queries(0):
        assert topic_cache.get("cached") is first

    topic.retry_count = 5
    topic.save()  # a change made here is seen at once
    assert topic_cache.get("cached").retry_count == 5
    TopicGroup.objects.create(topic=topic, name="audit")
    assert set(topic_cache.get("cached").group_rows) == {"billing", "audit"}


@pytest.mark.django_db(transaction=True)
def test_it_never_shares_what_a_transaction_read():
    topic_cache.forget()
    with transaction.atomic():
        Topic.objects.create(name="uncommitted")
        assert topic_cache.get("uncommitted") is not None
        transaction.set_rollback(True)
    assert topic_cache.get("uncommitted") is None
