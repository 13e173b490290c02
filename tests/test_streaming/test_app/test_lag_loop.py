"""`streaming.app.lag_loop.LagLoop` with a fake offsets reader: the sink's changed groups are
applied at once without a thread and parked (newest wins) with one, a round applies them before
reading the log offsets, and Burrow's status changes become counted, written health events."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from lab.records import Log
from state import codec
from state.model import Group
from state.replay import fold
from streaming.app.driver_events import DriverEvents
from streaming.app.lag_loop import LagLoop
from streaming.health.lag import LagTracker, LogOffsets, PartitionEnds
from streaming.pipeline.sinks import HEALTH_EVENTS
from streaming.serving.burrow import Burrow
from streaming.serving.status import MirrorStatus


def group(gid: str, offset: int) -> Group:
    log = Log(partition=0)
    log.commit(gid, "t", 0, offset)
    g = fold(None, log.records, group_id=gid).group
    assert g is not None
    return g


def row(g: Group) -> Any:
    return SimpleNamespace(
        kind="snapshot", group_id=g.group_id, summary=json.dumps({"exists": True}), blob=codec.encode(g)
    )


class FakeReader:
    def __init__(self) -> None:
        self.end = 100
        self.asked: list[set[tuple[str, int]]] = []

    def read(self, wanted: Any, subscribed: Any = ()) -> LogOffsets:
        self.asked.append(set(wanted))
        return LogOffsets(0, {tp: PartitionEnds(0, self.end, self.end) for tp in wanted})


class FakeSink:
    def __init__(self) -> None:
        self.written: list[tuple[str, list[dict[str, Any]]]] = []

    def write_driver_events(self, events: list[dict[str, Any]], at_ms: int, name: str) -> None:
        self.written.append((name, events))


def loop(reader: FakeReader | None) -> tuple[LagLoop, LagTracker, MirrorStatus, FakeSink]:
    tracker = LagTracker("read_committed", 60)
    burrow = Burrow(tracker, "c", 10, 0)
    store = MirrorStatus()
    events = DriverEvents()
    sink = FakeSink()
    events.attach(sink)  # type: ignore[arg-type]
    return LagLoop(0.1, store, tracker, burrow, reader=reader, events=events), tracker, store, sink


def test_without_a_thread_groups_are_applied_at_once() -> None:
    lag, tracker, _store, _sink = loop(None)
    lag.on_batch(0, [row(group("g", 40))])
    assert tracker.view("g") is not None
    lag.on_batch(1, [SimpleNamespace(kind="deleted", group_id="g")])
    assert tracker.view("g") is None


def test_parked_groups_are_applied_before_the_round_reads_offsets() -> None:
    reader = FakeReader()
    lag, tracker, _store, _sink = loop(reader)
    lag._thread = object()  # type: ignore[assignment]  # as if started: park, do not apply
    lag.on_batch(0, [row(group("g", 10))])
    lag.on_batch(1, [row(group("g", 40))])  # the newest of a group wins
    assert tracker.view("g") is None
    lag.round()
    assert reader.asked == [{("t", 0)}]
    [r] = tracker.group_lag("g") or []
    assert (r.committed, r.end, r.lag) == (40, 100, 60)


class FakeBurrow:
    """Burrow's evaluation as the loop sees it: the change events of one evaluation."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events
        self.history = SimpleNamespace(record=lambda views, tracker: None)

    def evaluate_all(self, now_ms: int, *, pause: Any = None) -> list[dict[str, Any]]:
        return self.events


def test_status_changes_become_counted_health_events() -> None:
    events = [
        {"type": "group_status_changed", "group_id": "g", "before": "OK", "after": "ERR"},
        {"type": "partition_stalled", "group_id": "g", "topic": "t", "partition": 0},
        {"type": "partition_stalled", "group_id": "g", "topic": "t", "partition": 1},
    ]
    store = MirrorStatus()
    sink = FakeSink()
    driver_events = DriverEvents()
    driver_events.attach(sink)  # type: ignore[arg-type]
    tracker = LagTracker("read_committed", 60)
    lag = LagLoop(0.1, store, tracker, FakeBurrow(events), reader=FakeReader(), events=driver_events)  # type: ignore[arg-type]
    lag.round()
    assert store.tallies() == {
        ("event", "group_status_changed"): 1,
        ("event", "partition_stalled"): 2,
    }
    assert sink.written == [(HEALTH_EVENTS, events)]


def test_a_health_event_write_that_fails_does_not_fail_the_round() -> None:
    class BrokenSink(FakeSink):
        def write_driver_events(self, events: list[dict[str, Any]], at_ms: int, name: str) -> None:
            raise RuntimeError("events topic unavailable")

    store = MirrorStatus()
    driver_events = DriverEvents()
    driver_events.attach(BrokenSink())  # type: ignore[arg-type]
    events = [{"type": "offset_rewound", "group_id": "g"}]
    tracker = LagTracker("read_committed", 60)
    lag = LagLoop(0.1, store, tracker, FakeBurrow(events), reader=FakeReader(), events=driver_events)  # type: ignore[arg-type]
    lag.round()
    assert store.tallies() == {("event", "offset_rewound"): 1}


def test_many_groups_are_applied_in_chunks_with_the_same_result(monkeypatch: Any) -> None:
    """A backfill hands over more groups than one chunk: every group reaches the tracker and
    Burrow's window, a deletion later in the same hand-over wins over an earlier state, and a
    generator is read once (`LagLoop.apply` slices it)."""
    monkeypatch.setattr("streaming.app.lag_loop.APPLY_CHUNK", 3)
    lag, tracker, _, _ = loop(None)
    groups = [group(f"g{i}", 10 + i) for i in range(8)]
    handed = ((g.group_id, codec.encode(g)) for g in [*groups, groups[1]])
    lag.apply(handed)
    assert sorted(tracker.groups) == sorted(g.group_id for g in groups)
    assert {gid: v.offsets[("t", 0)][0] for gid, v in tracker.groups.items()} == {
        f"g{i}": 10 + i for i in range(8)
    }
    assert lag.burrow.history.groups() == sorted(g.group_id for g in groups)
    lag.apply([("g7", None), ("g2", codec.encode(group("g2", 99))), ("g4", None), ("g4", None)])
    assert sorted(tracker.groups) == sorted(f"g{i}" for i in (0, 1, 2, 3, 5, 6))
    assert tracker.groups["g2"].offsets[("t", 0)][0] == 99
    assert lag.burrow.history.groups() == sorted(f"g{i}" for i in (0, 1, 2, 3, 5, 6))


def test_groups_share_one_key_tuple_per_topic_partition(monkeypatch: Any) -> None:
    """The views' offsets and owners and Burrow's windows of every group hold the same tuple for a
    topic-partition (`streaming.health.lag.KeyTable`); a table grown past the rounds' partitions is
    forgotten, and groups applied after that are as they were, sharing anew."""
    lag, tracker, _, _ = loop(None)
    lag.apply((g.group_id, codec.encode(g)) for g in (group("a", 1), group("b", 2)))
    (ka,) = tracker.groups["a"].offsets
    (kb,) = tracker.groups["b"].offsets
    assert ka == kb == ("t", 0) and ka is kb
    windows = [lag.burrow.history.live(gid) for gid in ("a", "b")]
    assert all(w is not None and next(iter(w)) is ka for w in windows)
    monkeypatch.setattr("streaming.health.lag.KEYS_SLACK", 0)
    tracker.keys.key(("gone", 0))
    tracker.keys.key(("gone", 1))
    tracker.apply_round(LogOffsets(0, {("t", 0): PartitionEnds(0, 5, 5)}))  # 3 keys > 2 x 1
    assert tracker.keys.table == {}
    lag.apply([("c", codec.encode(group("c", 3))), ("d", codec.encode(group("d", 4)))])
    (kc,) = tracker.groups["c"].offsets
    (kd,) = tracker.groups["d"].offsets
    assert kc == ka and kc is kd and kc is not ka
    assert tracker.groups["c"].offsets[kc][0] == 3
