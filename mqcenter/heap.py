"""The garbage collector of a broker process, set once it has started.

Measured on 2 cores (`python -m bench longpoll`: 1,000 waiting long-polls and one produce
of 1,000 messages): with CPython's defaults, a full collection walks ~150,000-190,000 objects and
holds the interpreter 65-105 ms, every few seconds under load, wherever it lands: in a
produce's transaction, in the middle of a thousand answers. Most of those objects are the
modules, settings and URL patterns loaded at start-up, which live as long as the process.

So, once started, the process collects once, moves everything that survived into the
collector's permanent generation (`gc.freeze()`: never walked again) and collects the young
generation every MQ_GC_THRESHOLD allocations instead of every 700. A full collection then
walks ~40,000-70,000 objects in 13-28 ms, and in four bursts of 1,000 none runs at all.
Garbage cycles still go, a little later: the cost is at most that many objects' memory.
"""

from __future__ import annotations

import gc
import os

DEFAULT_THRESHOLD = 20_000


def heap_settle() -> None:
    """Load what requests would load lazily, then freeze what is there and space out the
    young collections."""
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018 - imports every view module now, so they are frozen too
    gc.collect()
    gc.freeze()
    threshold = int(os.environ.get("MQ_GC_THRESHOLD", str(DEFAULT_THRESHOLD)))
    if threshold > 0:
        _, older, oldest = gc.get_threshold()
        gc.set_threshold(threshold, older, oldest)
