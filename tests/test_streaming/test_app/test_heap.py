"""`streaming.app.heap`: the driver's long-lived objects frozen once ready, and the whole heap
collected and frozen again every interval -- with the interpreter's real collector (each test
leaves it unfrozen)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from streaming.app.heap import DriverHeap
from streaming.app.supervisor import QueryRun, QuerySupervisor, RestartPolicy
from streaming.serving.store import SnapshotStore
from streaming.settings import load_settings
from tests.test_streaming.test_app.test_supervisor import FakeQuery


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


class Cycle:
    """An object in a reference cycle: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


def test_nothing_happens_before_ready() -> None:
    ready = [False]
    heap = DriverHeap(lambda: ready[0])
    assert not heap.step(0.0) and not heap.step(10_000.0)
    assert gc.get_freeze_count() == 0 and heap.last_pause_s is None
    ready[0] = True
    assert heap.step(10_001.0)
    assert heap.last_pause_s is not None and gc.get_freeze_count() > 0


def test_what_lives_at_ready_is_frozen_and_later_garbage_is_still_collected() -> None:
    # objects the collector tracks (a dict of atomic values is not tracked: one holding a list is)
    held = [{"group": [i]} for i in range(50_000)]
    probes = {id(held[0]), id(held[-1]), id(held[-1]["group"])}
    assert probes <= {id(o) for o in gc.get_objects()}
    heap = DriverHeap(lambda: True, interval_s=3600)
    assert heap.step(0.0)
    # frozen: in no generation a collection walks
    assert not probes & {id(o) for o in gc.get_objects()}
    assert gc.get_freeze_count() >= 2 * len(held)
    # allocated after the freeze: collected as ever
    late = weakref.ref(Cycle())
    gc.collect()
    assert late() is None
    heap.stop()
    assert gc.get_freeze_count() == 0


def test_a_frozen_cycle_waits_for_the_next_full_collection() -> None:
    heap = DriverHeap(lambda: True, interval_s=3600)
    keep: list[Any] = [Cycle()]
    cycle = weakref.ref(keep[0])
    assert heap.step(0.0)  # the cycle is alive: frozen
    keep.clear()  # now garbage, but frozen
    gc.collect()
    assert cycle() is not None  # a frozen cycle is not collected ...
    assert not heap.step(3599.0) and cycle() is not None
    survivors = [[i] for i in range(20_000)]
    assert heap.step(3600.0)  # ... until the next full collection, which freezes what lives now
    assert cycle() is None
    assert {id(survivors[0]), id(survivors[-1])}.isdisjoint(id(o) for o in gc.get_objects())
    assert not heap.step(3601.0) and heap.step(7200.0)


def test_the_supervisor_runs_the_heap_while_the_query_runs() -> None:
    s = load_settings(bootstrap_servers="localhost:9092", reconcile_interval_s=0)
    store = SnapshotStore()
    run = QueryRun(query=None)
    steps: list[float] = []
    sup = QuerySupervisor(
        s,
        store,
        run,
        RestartPolicy(5, 60),
        begin=lambda: None,
        restart=FakeQuery,  # type: ignore[arg-type]
        housekeeping=[steps.append],
        clock=lambda: 0.0,
    )
    sup._next_topic_check = 1e9  # no query yet, and none begun: no chores
    sup.step(5.0)
    assert steps == []
    run.query = FakeQuery()  # type: ignore[assignment]
    sup.step(6.0)
    sup.step(7.0)
    assert steps == [6.0, 7.0]
