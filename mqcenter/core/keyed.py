"""Items registered per key while something waits, shared between threads: the pulls waiting
on a (topic, group) for wake hints (`registry.wakeups`) and for hand-offs
(`mqcenter.handoffs`). Each key's items are a dict used as an insertion-ordered set, so the
longest-waiting comes first."""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V", bound=Hashable)


@contextmanager
def registered(lock: threading.Lock, table: dict[K, dict[V, None]], key: K, item: V) -> Iterator[V]:
    """`item` in `table[key]` while the block runs, added and removed under `lock`; a key
    left with nothing is dropped."""
    with lock:
        table.setdefault(key, {})[item] = None
    try:
        yield item
    finally:
        with lock:
            items = table.get(key)
            if items is not None:
                items.pop(item, None)
                if not items:
                    del table[key]
