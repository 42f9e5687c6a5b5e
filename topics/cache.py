"""Topics with their groups, remembered per process for a moment.

Every produce, pull and ack needs its topic's settings, owner and groups. Reading them once
a second per process instead of once a call takes two to three queries off each hot call.
Writes in this process forget the entry at once (model signals); another process's change
is seen within MQ_TOPIC_CACHE_SECONDS. Only rows read outside a transaction are remembered
(so a rolled-back topic is never shared). Cached rows are shared between threads: read them,
never change them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

from django.conf import settings
from django.db import connection

from topics.models import Topic, TopicGroup


class TopicCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[float, Topic]] = {}

    def get_many(self, names: Iterable[str]) -> dict[str, Topic]:
        """The existing topics among `names`, each with `group_rows` ({name: TopicGroup})."""
        now = time.monotonic()
        found: dict[str, Topic] = {}
        missing: set[str] = set()
        with self._lock:
            for name in names:
                hit = self._entries.get(name)
                if hit is not None and hit[0] > now:
                    found[name] = hit[1]
                else:
                    missing.add(name)
        if missing:
            loaded = _load(missing)
            if connection.in_atomic_block:
                # It may be this transaction's own uncommitted row: never share that.
                found.update(loaded)
                return found
            expires = time.monotonic() + settings.MQ_TOPIC_CACHE_SECONDS
            with self._lock:
                if len(self._entries) > 10_000:
                    self._entries.clear()
                for name, topic in loaded.items():
                    self._entries[name] = (expires, topic)
            found.update(loaded)
        return found

    def get(self, name: str) -> Topic | None:
        return self.get_many([name]).get(name)

    def peek(self, name: str) -> Topic | None:
        """The remembered topic, without reading the database: None if it is not (or no
        longer) remembered, which does not mean it does not exist."""
        with self._lock:
            hit = self._entries.get(name)
        return hit[1] if hit is not None and hit[0] > time.monotonic() else None

    def forget(self, name: str | None = None) -> None:
        with self._lock:
            if name is None:
                self._entries.clear()
            else:
                self._entries.pop(name, None)


def _load(names: set[str]) -> dict[str, Topic]:
    topics = {t.name: t for t in Topic.objects.filter(name__in=names)}
    for topic in topics.values():
        topic.group_rows = {}  # type: ignore[attr-defined]
    by_id = {t.pk: t for t in topics.values()}
    for group in TopicGroup.objects.filter(topic_id__in=by_id):
        group.topic = by_id[group.topic_id]  # no lazy load later
        group.topic.group_rows[group.name] = group  # type: ignore[attr-defined]
    return topics


topic_cache = TopicCache()


def forget_topic(sender: type, instance: Topic | TopicGroup, **kwargs: object) -> None:
    """post_save / post_delete receiver (connected in TopicsConfig.ready)."""
    if isinstance(instance, TopicGroup):
        topic_cache.forget()  # the group's topic name may not be loaded; groups change rarely
    else:
        topic_cache.forget(instance.name)
