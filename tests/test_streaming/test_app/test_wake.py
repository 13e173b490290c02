"""`streaming.app.wake.ExpiryWake` with a fake query and clock: a wake when a deadline is due and
the query idles; none when a batch covered it, while the query has data, or for a query without
the side input; the seed batch covers nothing; wakes read by committed batches are removed."""

from __future__ import annotations

from typing import Any

from streaming.app.wake import ExpiryWake
from streaming.serving.status import BatchStats, MirrorStatus
from streaming.serving.store import SnapshotStore


class FakeDefinition:
    def __init__(self, wakes: bool = True) -> None:
        self.wakes = wakes
        self.woken: list[int] = []
        self.removed_before: list[int] = []

    def wake(self, at_ms: int) -> None:
        self.woken.append(at_ms)

    def remove_wakes(self, before_ms: int) -> int:
        self.removed_before.append(before_ms)
        return 0


class FakeQuery:
    def __init__(self) -> None:
        self.status: dict[str, Any] = {"isDataAvailable": False, "isTriggerActive": False}


class Harness:
    def __init__(self, wakes: bool = True) -> None:
        self.now = 10_000
        self.store = SnapshotStore(renderer=lambda blob: {})
        self.status = MirrorStatus()
        self.definition = FakeDefinition(wakes)
        self.query = FakeQuery()
        self.wake = ExpiryWake(
            self.store,
            self.status,
            lambda: self.definition,
            lambda: self.query,
            0.0,
            clock_ms=lambda: self.now,
        )

    def group(self, group_id: str, deadline: int | None, batch_id: int = 1) -> None:
        self.store.apply(batch_id, [(group_id, b"x", {"group_id": group_id, "next_deadline_ms": deadline})])

    def batch(self, batch_id: int, timestamp_ms: int) -> None:
        self.status.batch_done(BatchStats(batch_id=batch_id, timestamp_ms=timestamp_ms))

    def step(self) -> list[int]:
        self.wake.work()
        return self.definition.woken


def test_a_due_deadline_wakes_an_idle_query_once() -> None:
    h = Harness()
    h.group("g", 12_000)
    assert h.step() == []  # not due yet
    h.now = 12_001
    assert h.step() == [12_001]
    h.now = 12_500
    assert h.step() == [12_001]  # the wake's batch fires it: no second wake
    h.group("h", 11_900)  # a deadline below the wake's time: its batch fires it too
    assert h.step() == [12_001]
    h.group("i", 13_000)
    h.now = 13_001
    assert h.step() == [12_001, 13_001]


def test_no_wake_while_the_query_has_data_or_once_a_batch_covered_the_deadline() -> None:
    h = Harness()
    h.group("g", 12_000)
    h.now = 12_100
    h.query.status["isDataAvailable"] = True  # a batch runs: the next one fires the timeout
    assert h.step() == []
    h.batch(5, 12_050)  # it did (its timestamp is past the deadline)
    h.query.status["isDataAvailable"] = False
    assert h.step() == []
    h.batch(6, 12_090)
    h.group("late", 12_095, batch_id=6)
    assert h.step() == [12_100]  # 12,095 is after the last batch's timestamp: a wake


def test_the_seed_batch_covers_nothing() -> None:
    """Batch 0 of a seeded checkpoint sets a deadline already passed to fire in the next batch."""
    h = Harness()
    h.group("seeded", 11_000, batch_id=-1)
    h.batch(0, 11_500)
    h.now = 11_600
    assert h.step() == [11_600]


def test_a_query_without_the_side_input_is_never_woken() -> None:
    """A checkpoint made before the side input: its query runs a batch every trigger anyway."""
    h = Harness(wakes=False)
    h.group("g", 1_000)
    assert h.step() == []


def test_wakes_read_by_committed_batches_are_removed() -> None:
    h = Harness()
    h.batch(3, 9_000)
    h.group("a", 8_500, batch_id=3)  # fired in batch 3
    assert h.step() == []
    h.batch(4, 9_800)  # batch 3 is committed once 4 ran
    h.group("b", 10_001, batch_id=4)
    h.now = 10_002
    assert h.step() == [10_002]
    assert h.definition.removed_before == [9_000 - 10_000]
