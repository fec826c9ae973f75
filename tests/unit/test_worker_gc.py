"""`freeze_imports`: what a Python worker's first task freezes, and when it freezes again."""

from __future__ import annotations

import gc
import sys
import types

import pytest

from autosizer.pipeline import worker_gc
from autosizer.pipeline.worker_gc import GC_FREEZE_ENV, freeze_imports


@pytest.fixture
def fresh(monkeypatch):
    """A process that has frozen nothing yet, unfrozen again afterwards (pytest's own objects
    must stay collectable for the tests after)."""
    gc.unfreeze()
    monkeypatch.setattr(worker_gc, "_frozen", None)
    monkeypatch.delenv(GC_FREEZE_ENV, raising=False)
    yield
    gc.unfreeze()


def test_a_first_task_freezes_what_is_loaded_and_a_second_freezes_nothing_more(fresh):
    freeze_imports()
    frozen = gc.get_freeze_count()
    assert frozen > 1000, "the modules loaded are out of the collector's reach"
    kept = [[] for _ in range(100)]  # what a task makes: collected as before, not frozen
    freeze_imports()
    # not more (a frozen object freed meanwhile by its last reference leaves the count)
    assert gc.get_freeze_count() <= frozen and kept


def test_a_module_imported_by_a_task_is_frozen_at_the_next_task(fresh, monkeypatch):
    freeze_imports()
    frozen = gc.get_freeze_count()
    module = types.ModuleType("lazily_imported")
    module.table = {str(i): [i] for i in range(2000)}
    monkeypatch.setitem(sys.modules, "lazily_imported", module)
    freeze_imports()
    assert gc.get_freeze_count() > frozen + 1000


def test_no_gc_freeze_leaves_the_collector_as_pyspark_has_it(fresh, monkeypatch):
    monkeypatch.setenv(GC_FREEZE_ENV, "0")
    freeze_imports()
    assert gc.get_freeze_count() == 0


def test_frozen_objects_are_still_freed_when_nothing_refers_to_them(fresh):
    """The freeze keeps only cyclic garbage: a batch's table dropped by its last reference goes."""
    import weakref

    class Table:
        pass

    table = Table()
    gone = weakref.ref(table)
    freeze_imports()
    del table
    assert gone() is None
