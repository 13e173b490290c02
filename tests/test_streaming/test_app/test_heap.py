"""`streaming.app.heap`: the driver's long-lived objects frozen once ready, survivors frozen every
interval, the whole heap collected every full interval -- with the interpreter's real collector.

Each scenario runs in an interpreter of its own: the collector is process-wide, and a mirror
running in the test process (a session fixture's) steps its own `DriverHeap` meanwhile -- once a
test here failed in CI because another heap collected in full while it looked.  The supervisor
stepping it: test_supervisor.py."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]

PRELUDE = """
import gc, json, weakref
from streaming.app.heap import DriverHeap

class Cycle:
    # an object in a reference cycle: only the cyclic collector frees it
    def __init__(self):
        self.me = self

out = {}
"""


def isolated(body: str) -> dict[str, Any]:
    """Run ``body`` after `PRELUDE` in a fresh interpreter; what it put in ``out``."""
    code = PRELUDE + textwrap.dedent(body) + "\nprint(json.dumps(out))\n"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_nothing_happens_before_ready() -> None:
    out = isolated(
        """
        ready = [False]
        heap = DriverHeap(lambda: ready[0])
        out["before"] = [heap.step(0.0), heap.step(10_000.0), gc.get_freeze_count(), heap.last]
        ready[0] = True
        out["ready"] = heap.step(10_001.0)
        out["frozen"] = gc.get_freeze_count()
        out["last"] = heap.last[0]
        """
    )
    assert out["before"] == [None, None, 0, None]
    assert out["ready"] == "full" and out["last"] == "full" and out["frozen"] > 0


def test_what_lives_at_ready_is_frozen_and_later_garbage_is_still_collected() -> None:
    out = isolated(
        """
        # objects the collector tracks (a dict of atomic values is not tracked: one holding a list is)
        held = [{"group": [i]} for i in range(50_000)]
        probes = {id(held[0]), id(held[-1]), id(held[-1]["group"])}
        out["tracked_before"] = probes <= {id(o) for o in gc.get_objects()}
        heap = DriverHeap(lambda: True, freeze_interval_s=60, full_interval_s=3600)
        out["step"] = heap.step(0.0)
        # frozen: in no generation a collection walks
        out["tracked_after"] = bool(probes & {id(o) for o in gc.get_objects()})
        out["frozen"] = gc.get_freeze_count()
        late = weakref.ref(Cycle())  # allocated after the freeze: collected as ever
        gc.collect()
        out["late_collected"] = late() is None
        heap.stop()
        out["frozen_after_stop"] = gc.get_freeze_count()
        """
    )
    assert out["tracked_before"] and out["step"] == "full"
    assert not out["tracked_after"] and out["frozen"] >= 2 * 50_000
    assert out["late_collected"]
    assert out["frozen_after_stop"] == 0


def test_survivors_are_frozen_every_interval_and_frozen_cycles_wait_for_the_full_collection() -> None:
    out = isolated(
        """
        heap = DriverHeap(lambda: True, freeze_interval_s=60, full_interval_s=3600)
        keep = [Cycle()]
        cycle = weakref.ref(keep[0])
        steps = [heap.step(0.0)]  # the cycle is alive: frozen
        frozen = gc.get_freeze_count()
        keep.clear()  # now garbage, but frozen
        survivors = [[i] for i in range(20_000)]
        steps += [heap.step(30.0), heap.step(60.0)]  # not due; then the survivors are frozen
        out["survivors_frozen"] = gc.get_freeze_count() - frozen
        gc.collect()
        out["alive_after_collect"] = cycle() is not None  # a frozen cycle is not collected ...
        steps.append(heap.step(120.0))
        out["alive_after_freeze"] = cycle() is not None
        steps.append(heap.step(3600.0))  # ... until the hourly full collection
        out["alive_after_full"] = cycle() is not None
        steps += [heap.step(3601.0), heap.step(3660.0)]  # the next freeze: an interval after the full one
        out["steps"] = steps
        """
    )
    assert out["steps"] == ["full", None, "freeze", "freeze", "full", None, "freeze"]
    assert out["survivors_frozen"] >= 20_000
    assert out["alive_after_collect"] and out["alive_after_freeze"]
    assert not out["alive_after_full"]


def test_the_heap_is_the_lifecycles_mirror_heap_worker_and_waits_for_ready_in_process() -> None:
    """In this process only what touches no collector: its thread and a stop before ready."""
    import gc

    from streaming.app.heap import DriverHeap
    from streaming.lifecycle import Part, Worker

    heap = DriverHeap(lambda: False)
    assert isinstance(heap, Worker) and isinstance(heap, Part)
    assert (heap.thread_name, heap.name, heap.interval_s) == ("mirror-heap", "heap", 1.0)
    frozen = gc.get_freeze_count()
    assert heap.step(0.0) is None and heap.step(1e9) is None and heap.last is None
    heap.stop()  # never started, never froze: nothing to undo
    assert gc.get_freeze_count() == frozen
