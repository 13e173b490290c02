"""Rebalance timings (`state.timing`): groups built as lists of records, replayed, timed.

Record sequences follow what a 4.3.1 broker writes (tests/test_state/test_timing_live.py checks
them against real clients): classic -- a generation-0 record at the first JoinGroup, then the
leader's SyncGroup record with ``currentStateTimestamp`` = the end of the join phase; KIP-848 --
member record, group epoch, targets, target epoch (4.3: AssignmentTimestamp), member epochs."""

from __future__ import annotations

from typing import Any

import pytest

from decoders.records import ConsumerGroupTargetAssignmentMetadataValue, GroupKey
from lab.records import T0, Log, cm, tip
from state import codec
from state.events import RebalanceTimed
from state.replay import fold
from state.timing import Timing, phases


def _timed(log: Log, group: str = "g") -> list[RebalanceTimed]:
    res = fold(None, [r for r in log.records if r.key.group_id == group], group_id=group)
    return [e for e in res.events if isinstance(e, RebalanceTimed)]


def _fields(e: RebalanceTimed) -> tuple[Any, ...]:
    return (e.generation, e.started_ms, e.assigned_ms, e.stable_ms, e.duration_ms)


# ---------------------------------------------------------------------------------------- classic
def test_a_new_classic_group_is_timed_from_its_generation_zero_record() -> None:
    log = Log()
    log.new_empty_group("g")  # the first JoinGroup, T0
    log.tick(150)
    join_done = log.now_ms
    log.tick(50).classic("g", 2, [cm("a"), cm("b")], state_ts=join_done)  # leader's SyncGroup
    (e,) = _timed(log)
    assert _fields(e) == (2, T0, T0 + 150, T0 + 200, 200)
    assert e.kind == "classic" and e.members == 2 and e.skipped == 1
    assert set(e.joined) == {"a", "b"} and e.joined_count == 2 and e.left == ()
    assert phases(e.kind, e.started_ms, e.assigned_ms, e.stable_ms) == [
        ("total", 200),
        ("PreparingRebalance", 150),
        ("CompletingRebalance", 50),
    ]


def test_a_later_classic_rebalance_has_only_its_sync_phase() -> None:
    log = Log()
    log.classic("g", 1, [cm("a")])
    log.tick(60_000)
    joined = log.now_ms
    log.tick(40).classic("g", 2, [cm("a"), cm("b")], state_ts=joined)
    events = _timed(log)
    # generation 1's own sync phase (its record says 0 ms), then generation 2's: no start known
    assert [_fields(e) for e in events] == [
        (1, None, T0, T0, None),
        (2, None, joined, joined + 40, None),
    ]
    assert events[1].joined == ("b",) and events[1].left == ()
    assert phases("classic", None, joined, joined + 40) == [("CompletingRebalance", 40)]


@pytest.mark.parametrize(
    ("case", "second"),
    [
        ("v0/v1 record: no currentStateTimestamp", {"state_ts": None}),
        ("currentStateTimestamp after the record", {"state_ts": T0 + 10**6}),
        ("ended Empty", {"members": []}),
        ("the same generation again", {"generation": 1}),
    ],
)
def test_classic_records_that_time_nothing(case: str, second: dict[str, Any]) -> None:
    log = Log()
    log.classic("g", 1, [cm("a")], state_ts=None)
    log.tick(1_000)
    kw = {"generation": 2, "members": [cm("a"), cm("b")], **second}
    log.classic("g", kw.pop("generation"), kw.pop("members"), **kw)
    assert _timed(log) == [], case


def test_a_generation_going_back_drops_the_timing_in_progress() -> None:
    log = Log()
    log.new_empty_group("g")
    log.tick(100).classic("g", 3, [cm("a")], state_ts=log.now_ms)
    log.tick(100).new_empty_group("g")  # a new group under the same id...
    log.tick(100).classic("g", 1, [cm("a")], state_ts=log.now_ms - 50)  # ... or a log gone wrong
    events = _timed(log)
    assert [e.generation for e in events] == [3, 1]
    assert _fields(events[1]) == (1, T0 + 200, T0 + 250, T0 + 300, 100)  # from its own gen-0 record


# ----------------------------------------------------------------------------------------- KIP-848
def _k848_settled(log: Log, members: dict[str, list[int]], epoch: int) -> None:
    """One coordinator write that takes the group to Stable at ``epoch`` (creation)."""
    for m in members:
        log.k848_member("g", m, ["t"])
    log.k848_epoch("g", epoch)
    for m, ps in members.items():
        log.k848_target("g", m, [tip("T", *ps)])
    log.k848_target_epoch("g", epoch)
    for m, ps in members.items():
        log.k848_current("g", m, epoch, [tip("T", *ps)])


def _target_epoch(log: Log, epoch: int, computed_at: int | None) -> None:
    value = ConsumerGroupTargetAssignmentMetadataValue(
        assignment_epoch=epoch, assignment_timestamp_ms=computed_at
    )
    log.rec(6, GroupKey("g"), value)


def test_a_modern_group_s_first_rebalance_is_not_timed() -> None:
    """A group's creation looks like the replay of a compacted log: no trusted start."""
    log = Log()
    _k848_settled(log, {"m1": [0, 1]}, 2)
    assert _timed(log) == []


def test_a_member_joining_a_settled_consumer_group() -> None:
    log = Log()
    _k848_settled(log, {"m1": [0, 1]}, 2)
    log.tick(10_000)
    start = log.now_ms
    log.k848_member("g", "m2", ["t"])  # the heartbeat of the new member: member, epoch bump
    log.k848_epoch("g", 3)
    log.k848_current("g", "m2", 2, [], previous=0)
    log.tick(900)  # the assignment is computed later (4.3 batches assignments)
    log.k848_target("g", "m1", [tip("T", 0)])
    log.k848_target("g", "m2", [tip("T", 1)])
    _target_epoch(log, 3, log.now_ms - 5)
    assigned = log.now_ms - 5
    log.k848_current("g", "m1", 2, [tip("T", 0)], previous=2, state=1, pending=[tip("T", 1)])  # revoking
    log.tick(300).k848_current("g", "m1", 3, [tip("T", 0)], previous=2)
    log.tick(400).k848_current("g", "m2", 3, [tip("T", 1)], previous=2)  # the last member reconciled
    (e,) = _timed(log)
    assert _fields(e) == (3, start, assigned, start + 1600, 1600)
    assert e.kind == "consumer" and e.joined == ("m2",) and e.left == () and e.members == 2
    assert phases(e.kind, e.started_ms, e.assigned_ms, e.stable_ms) == [
        ("total", 1600),
        ("Assigning", 895),
        ("Reconciling", 705),
    ]


def test_a_member_leaving_and_the_assignment_timestamp_clamped_to_the_start() -> None:
    log = Log()
    _k848_settled(log, {"m1": [0], "m2": [1]}, 5)
    log.tick(5_000)
    start = log.now_ms
    log.k848_leave("g", "m2")
    log.k848_epoch("g", 6)
    log.k848_target("g", "m1", [tip("T", 0, 1)])
    _target_epoch(log, 6, start - 40)  # computed before the write was appended
    log.k848_current("g", "m1", 6, [tip("T", 0, 1)], previous=5)
    (e,) = _timed(log)
    assert _fields(e) == (6, start, start, start, 0)
    assert e.left == ("m2",) and e.joined == () and e.members == 1


@pytest.mark.parametrize(
    "trouble",
    ["target ahead of the group epoch", "group epoch going back", "rebalance ends Empty"],
)
def test_modern_histories_that_time_nothing(trouble: str) -> None:
    log = Log()
    _k848_settled(log, {"m1": [0]}, 2)
    log.tick(1_000)
    if trouble == "target ahead of the group epoch":
        _target_epoch(log, 4, None)  # a K=3 missing: compaction or a foreign writer
        log.k848_epoch("g", 4)
        log.k848_current("g", "m1", 4, [tip("T", 0)])
    elif trouble == "group epoch going back":
        log.k848_member("g", "m2", ["t"])
        log.k848_epoch("g", 1)
        _target_epoch(log, 2, None)
        log.k848_current("g", "m2", 2, [tip("T", 1)])
    else:
        log.k848_leave("g", "m1")
        log.k848_epoch("g", 3)
        _target_epoch(log, 3, None)
    assert _timed(log) == [], trouble


def test_after_a_contradiction_the_next_settled_state_restores_trust() -> None:
    log = Log()
    _k848_settled(log, {"m1": [0]}, 2)
    _target_epoch(log, 4, None)  # contradiction: not timed
    log.k848_epoch("g", 4)
    log.k848_current("g", "m1", 4, [tip("T", 0)])  # settled again at 4
    log.tick(2_000)
    start = log.now_ms
    log.k848_member("g", "m2", ["t"])
    log.k848_epoch("g", 5)
    _target_epoch(log, 5, None)
    log.k848_current("g", "m1", 5, [tip("T", 0)])
    log.tick(100).k848_current("g", "m2", 5, [tip("T", 1)])
    (e,) = _timed(log)
    assert _fields(e) == (5, start, start, start + 100, 100)


def test_share_and_streams_groups_are_timed_the_same_way() -> None:
    log = Log()
    log.share_member("s", "a")
    log.share_epoch("s", 1)
    log.share_target_epoch("s", 1)
    log.share_current("s", "a", 1, [tip("S", 0, 1)])
    log.tick(3_000)
    start = log.now_ms
    log.share_member("s", "b")
    log.share_epoch("s", 2)
    log.share_target_epoch("s", 2)
    log.share_current("s", "a", 2, [tip("S", 0)])
    log.tick(250).share_current("s", "b", 2, [tip("S", 1)])
    (e,) = _timed(log, "s")
    assert (e.kind, *_fields(e)) == ("share", 2, start, start, start + 250, 250)

    log.streams_member("k", "a")
    log.streams_topology("k", 0, ["in"])
    log.streams_epoch("k", 1)
    log.streams_target_epoch("k", 1)
    log.streams_current("k", "a", 1, [0, 1])
    log.tick(1_000)
    start = log.now_ms
    log.streams_member("k", "b")
    log.streams_epoch("k", 2)
    log.streams_target_epoch("k", 2)
    log.streams_current("k", "a", 2, [0])
    log.tick(70).streams_current("k", "b", 2, [1])
    (e,) = _timed(log, "k")
    assert (e.kind, *_fields(e)) == ("streams", 2, start, start, start + 70, 70)


def test_timing_survives_the_codec_and_any_split_into_batches() -> None:
    log = Log()
    log.new_empty_group("g")
    log.tick(30).classic("g", 1, [cm("a")], state_ts=log.now_ms - 10)
    log.tick(5_000).classic("g", 2, [cm("a"), cm("b")], state_ts=log.now_ms - 7)
    whole = fold(None, log.records, group_id="g")
    assert whole.group is not None
    for cut in range(1, len(log.records)):
        first = fold(None, log.records[:cut], group_id="g").group
        assert first is not None
        rest = fold(codec.decode(codec.encode(first)), log.records[cut:], group_id="g")
        assert rest.group == whole.group, cut
    assert whole.group.last_timing == Timing(2, None, log.now_ms - 7, log.now_ms)
