"""Records lost to retention (`streaming.health.retention`): exact counts as the log start passes a
stopped group's committed offset, each position once, nothing for a group that resumes, the counts
kept across a restart (no second count), gone with the group; the margin before it happens."""

from __future__ import annotations

from typing import Any

import pytest

from streaming.health.lag import LagTracker, LogOffsets, PartitionEnds
from streaming.health.retention import RECORDS_LOST, Margin, RetentionWatch, margin
from tests.support.replay import committed_group as group


def round_(at_ms: int, starts: dict[tuple[str, int], int], end: int = 10_000) -> LogOffsets:
    return LogOffsets(at_ms, {tp: PartitionEnds(s, end, end) for tp, s in starts.items()})


@pytest.fixture
def watched() -> tuple[LagTracker, RetentionWatch, list[dict[str, Any]]]:
    tracker = LagTracker()
    watch = RetentionWatch(tracker)
    emitted: list[dict[str, Any]] = []
    watch.emit = lambda events, at: emitted.extend(events)
    return tracker, watch, emitted


def test_a_stopped_group_loses_exactly_what_the_log_start_passes(watched: Any) -> None:
    tracker, watch, emitted = watched
    gid = "tenant/orders ✓"
    tracker.apply_groups([(gid, group(gid, {("t", 0): 100, ("t", 1): 500}))])
    tracker.apply_round(round_(1000, {("t", 0): 0, ("t", 1): 0}))
    assert watch.lost == {} and emitted == []
    tracker.apply_round(round_(2000, {("t", 0): 160, ("t", 1): 400}))  # t:0 loses 100..159
    assert watch.lost_of(gid) == {("t", 0): 60}
    tracker.apply_round(round_(3000, {("t", 0): 160, ("t", 1): 400}))  # nothing new
    tracker.apply_round(round_(4000, {("t", 0): 250, ("t", 1): 520}))  # +90 on t:0, 20 on t:1
    assert watch.lost_of(gid) == {("t", 0): 150, ("t", 1): 20}
    assert [(e["type"], e["partition"], e["records"], e["records_total"]) for e in emitted] == [
        (RECORDS_LOST, 0, 60, 60),
        (RECORDS_LOST, 0, 90, 150),
        (RECORDS_LOST, 1, 20, 20),
    ]
    assert emitted[0] | {"timestamp_ms": 0} == {
        "type": RECORDS_LOST, "group_id": gid, "timestamp_ms": 0, "topic": "t", "partition": 0,
        "committed_offset": 100, "log_start_offset": 160, "records": 60, "records_total": 60,
    }  # fmt: skip
    # the group resumes from the log start (auto.offset.reset=earliest): nothing more is lost
    tracker.apply_groups([(gid, group(gid, {("t", 0): 250, ("t", 1): 600}))])
    tracker.apply_round(round_(5000, {("t", 0): 250, ("t", 1): 600}))
    assert watch.lost_of(gid) == {("t", 0): 150, ("t", 1): 20}


def test_a_round_looks_only_at_the_groups_and_partitions_that_changed(
    watched: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A quiet round walks no group's offsets; a group whose view changed is looked at with the
    log starts unchanged, and a moved log start looks at every group again."""
    tracker, watch, _ = watched
    tracker.apply_groups([("a", group("a", {("t", 0): 100})), ("b", group("b", {("t", 1): 100}))])
    starts = {("t", 0): 50, ("t", 1): 50}
    tracker.apply_round(round_(1000, starts))
    looked: list[str] = []
    name_of = tracker.name_of
    monkeypatch.setattr(tracker, "name_of", lambda t: looked.append(t) or name_of(t))
    tracker.apply_round(round_(2000, starts))
    assert looked == [] and watch.lost == {}
    # b's offset reset to a position retention already deleted, the log start unchanged: counted
    tracker.apply_groups([("b", group("b", {("t", 1): 20}))])
    tracker.apply_round(round_(3000, starts))
    assert looked == ["t"] and watch.lost_of("b") == {("t", 1): 30}
    looked.clear()
    tracker.apply_round(round_(4000, {("t", 0): 120, ("t", 1): 50}))  # a log start moved
    assert sorted(looked) == ["t", "t"] and watch.lost_of("a") == {("t", 0): 20}
    assert watch.lost_of("b") == {("t", 1): 30}  # counted once


def test_the_counts_survive_a_restart_without_a_second_count(watched: Any) -> None:
    tracker, watch, _ = watched
    tracker.apply_groups([("g", group("g", {("t", 0): 100}))])
    tracker.apply_round(round_(1000, {("t", 0): 130}))
    saved = watch.to_json()
    # a new mirror: the same committed offset, the same log start -- no new loss
    tracker2 = LagTracker()
    watch2 = RetentionWatch(tracker2)
    watch2.load(saved)
    tracker2.apply_groups([("g", group("g", {("t", 0): 100}))])
    assert tracker2.apply_round(round_(2000, {("t", 0): 130})) is None
    assert watch2.lost_of("g") == {("t", 0): 30}
    tracker2.apply_round(round_(3000, {("t", 0): 140}))
    assert watch2.lost_of("g") == {("t", 0): 40}


def test_a_deleted_group_takes_its_counts_along(watched: Any) -> None:
    tracker, watch, _ = watched
    tracker.apply_groups([("g", group("g", {("t", 0): 1}))])
    tracker.apply_round(round_(1000, {("t", 0): 5}))
    assert watch.totals() == [(("g", "t", 0), 4)]
    tracker.apply_groups([("g", None)])
    tracker.apply_round(round_(2000, {("t", 0): 5}))
    assert watch.totals() == [] and watch.to_json() == []


@pytest.mark.parametrize(
    ("committed", "start", "consume", "produce", "want"),
    [
        (1000, 400, 0.0, 10.0, Margin(600, 60.0)),  # stopped: the log start reaches it in 60 s
        (1000, 400, 4.0, 10.0, Margin(600, 100.0)),
        (1000, 400, 10.0, 10.0, Margin(600, None)),  # not closing
        (1000, 400, None, 10.0, Margin(600, 60.0)),  # no rate measured: taken as stopped
        (300, 400, 0.0, 10.0, Margin(0, 0.0)),  # already past: lost
        (400, 400, 0.0, 10.0, Margin(0, 0.0)),
    ],
)
def test_margin_table(
    committed: int, start: int, consume: float | None, produce: float, want: Margin
) -> None:
    assert margin(committed, start, consume, produce) == want
