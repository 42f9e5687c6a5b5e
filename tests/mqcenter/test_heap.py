"""A broker process, once started, freezes what it loaded out of the collector's reach and
spaces out young collections (mqcenter/heap.py)."""

from __future__ import annotations

import gc

import pytest

from mqcenter.heap import DEFAULT_THRESHOLD, heap_settle


@pytest.fixture
def collector():
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def test_it_freezes_the_loaded_heap_and_raises_the_young_threshold(collector, monkeypatch):
    monkeypatch.delenv("MQ_GC_THRESHOLD", raising=False)
    gc.unfreeze()
    heap_settle()
    assert gc.get_freeze_count() > 10_000  # Django, the URL patterns and every view module
    assert gc.get_threshold()[0] == DEFAULT_THRESHOLD
    # What is frozen is never walked again: a full collection only sees what came after.
    assert len(gc.get_objects()) < gc.get_freeze_count()


def test_zero_keeps_cpythons_threshold(collector, monkeypatch):
    monkeypatch.setenv("MQ_GC_THRESHOLD", "0")
    before = gc.get_threshold()
    heap_settle()
    assert gc.get_threshold() == before
