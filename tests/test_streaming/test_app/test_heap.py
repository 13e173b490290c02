"""`streaming.app.heap`: the driver's long-lived objects frozen once ready, survivors frozen every
interval, the whole heap collected every full interval -- with the interpreter's real collector
(each test leaves it unfrozen).  The supervisor stepping it: test_supervisor.py."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from streaming.app.heap import DriverHeap


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


class Cycle:
    """An object in a reference cycle: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


def dropped_cycle() -> weakref.ref[Cycle]:
    c = Cycle()
    return weakref.ref(c)


def test_nothing_happens_before_ready() -> None:
    ready = [False]
    heap = DriverHeap(lambda: ready[0])
    assert heap.step(0.0) is None and heap.step(10_000.0) is None
    assert gc.get_freeze_count() == 0
    ready[0] = True
    assert heap.step(10_001.0) == "full"
    assert heap.last is not None and heap.last[0] == "full"


def test_what_lives_at_ready_is_frozen_and_later_garbage_is_still_collected() -> None:
    # objects the collector tracks (a dict of atomic values is not tracked: one holding a list is)
    held = [{"group": [i]} for i in range(50_000)]
    probes = {id(held[0]), id(held[-1]), id(held[-1]["group"])}
    assert probes <= {id(o) for o in gc.get_objects()}
    heap = DriverHeap(lambda: True, freeze_interval_s=60, full_interval_s=3600)
    assert heap.step(0.0) == "full"
    # frozen: in no generation a collection walks
    assert not probes & {id(o) for o in gc.get_objects()}
    assert gc.get_freeze_count() >= 2 * len(held)
    # allocated after the freeze: collected as ever
    late = dropped_cycle()
    gc.collect()
    assert late() is None
    heap.stop()
    assert gc.get_freeze_count() == 0


def test_survivors_are_frozen_every_interval_and_frozen_cycles_wait_for_the_full_collection() -> None:
    heap = DriverHeap(lambda: True, freeze_interval_s=60, full_interval_s=3600)
    keep: list[Any] = [Cycle()]
    cycle = weakref.ref(keep[0])
    assert heap.step(0.0) == "full"  # the cycle is alive: frozen
    frozen = gc.get_freeze_count()
    keep.clear()  # now garbage, but frozen
    survivors = [[i] for i in range(20_000)]
    assert heap.step(30.0) is None  # not due
    assert heap.step(60.0) == "freeze"
    assert gc.get_freeze_count() >= frozen + len(survivors)
    gc.collect()
    assert cycle() is not None  # a frozen cycle is not collected ...
    assert heap.step(120.0) == "freeze" and cycle() is not None
    assert heap.step(3600.0) == "full"  # ... until the hourly full collection
    assert cycle() is None
    assert heap.step(3601.0) is None  # the next freeze is an interval after the full one
    assert heap.step(3660.0) == "freeze"
