"""Burrow's evaluation rules (core/internal/evaluator/caching.go) from tables, the lookup table of
kafka-lag-exporter, and the group filter -- pure, no broker."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest

from lab.records import Log
from state.replay import fold
from streaming.health import rules as b
from streaming.health.lag import (
    LagTracker,
    LogOffsets,
    LookupTable,
    PartitionEnds,
    lag_messages,
    lag_seconds,
)
from streaming.pipeline.prepare import GroupFilter, filter_packed
from streaming.serving.burrow import Burrow

NOW = 100_000


def commits(*rows: tuple[int, int, int | None]) -> list[int]:
    """A window as the rules read it (flat, lag None -> -1) from readable rows."""
    return b.window_of(rows)


# Each rule alone, as Burrow 1.9.5 defines it (caching.go)
RULES = [
    # rule, window, expected
    (b.rule1_lag_ever_zero, commits((10, 1000, 5), (20, 2000, 0)), True),
    (b.rule1_lag_ever_zero, commits((10, 1000, 5), (20, 2000, None)), False),  # unknown is not zero
    (b.rule2_rewind_at, commits((10, 1000, 5), (20, 2000, 5), (15, 3000, 5)), 2),
    (b.rule2_rewind_at, commits((30, 1000, 5), (20, 2000, 5), (10, 3000, 5)), 1),  # the first one
    (b.rule2_rewind_at, commits((10, 1000, 5), (20, 2000, 5)), -1),
    (b.rule2_rewind_at, commits((10, 1000, 5), (10, 2000, 5)), -1),  # equal is not lower
    (b.rule4_stalled, commits((10, 1000, 5), (10, 2000, 6), (10, 3000, 7)), True),
    (b.rule4_stalled, commits((10, 1000, 5), (11, 2000, 6)), False),
    (b.rule5_lag_not_decreasing, commits((10, 1000, 5), (20, 2000, 5), (30, 3000, 7)), True),
    (b.rule5_lag_not_decreasing, commits((10, 1000, 5), (20, 2000, 4)), False),
    (b.rule5_lag_not_decreasing, commits((10, 1000, 5), (20, 2000, None), (30, 3000, 6)), True),
    (b.rule5_lag_not_decreasing, commits((10, 1000, None), (20, 2000, None)), True),  # nothing known
]


def test_window_round_trip() -> None:
    rows = [(10, 1000, 5, 1100), (20, 2000, None, 2100), (15, 3000, 0, 3100)]
    assert b.window_of(rows) == [10, 1000, 5, 1100, 20, 2000, -1, 2100, 15, 3000, 0, 3100]
    assert b.commits_of(b.window_of(rows)) == rows
    assert b.commits_of(commits((10, 1000, 5))) == [(10, 1000, 5, 1000)]  # observed: the commit time


@pytest.mark.parametrize(("rule", "window", "expected"), RULES)
def test_rules(rule: object, window: list[int], expected: bool | int) -> None:
    assert rule(window) == expected  # type: ignore[operator]


@pytest.mark.parametrize(
    ("window", "rewind_at", "recovered"),
    [
        (commits((50, 1000, 5), (30, 2000, 25), (40, 3000, 15), (60, 4000, 5)), 1, True),  # past it
        (commits((50, 1000, 5), (30, 2000, 25), (50, 3000, 5)), 1, True),  # back at it
        (commits((50, 1000, 5), (30, 2000, 25), (49, 3000, 6)), 1, False),
    ],
)
def test_rule2_rewind_recovered(window: list[int], rewind_at: int, recovered: bool) -> None:
    assert b.rule2_rewind_at(window) == rewind_at
    assert b.rule2_recovered(window, rewind_at) is recovered


@pytest.mark.parametrize(
    ("window", "now_ms", "stopped"),
    [
        (commits((10, 1000, 5), (20, 11_000, 5)), 20_000, False),  # 9 s idle < 10 s span
        (commits((10, 1000, 5), (20, 11_000, 5)), 22_000, True),  # 11 s idle > 10 s span
        (commits((10, 1000, 5)), 2000, True),  # one commit: span 0
        # now in whole seconds, as Burrow reads the clock: 21.999 s is 21 s -> 10 s idle, not > 10 s
        (commits((10, 1000, 5), (20, 11_000, 5)), 21_999, False),
        (commits((10, 1000, 5), (20, 11_000, 5)), 22_000, True),
        (commits((10, 1500, 5)), 1999, False),  # 1.999 s -> 1 s: before the commit
    ],
)
def test_rule3_stopped(window: list[int], now_ms: int, stopped: bool) -> None:
    assert b.rule3_stopped(window, now_ms) is stopped
    flips = b.rule3_flips_at(window, 5, b.OK, 0)
    assert flips is not None and (now_ms > flips) is stopped  # the incremental evaluation's recheck time


# One row per status and per transition the issue names (Burrow 1.9.5's verdicts): window, current
# lag, the ring of recent sampled ends (Burrow's broker-offset ring), now, status
STATUS = [
    # -- statuses
    ("keeping up: lag zero now", commits((10, 1000, 5), (20, 2000, 5), (30, 3000, 5)), 0, [], 3500, b.OK),
    ("slow: lag never decreases", commits((10, 1000, 5), (20, 2000, 5), (30, 3000, 5)), 5, [], 3500, b.WARN),
    ("lag decreasing", commits((10, 1000, 5), (20, 2000, 3), (30, 3000, 1)), 1, [], 3500, b.OK),
    (
        "idle, caught up in the window",
        commits((10, 1000, 5), (20, 2000, 0), (30, 3000, 5)),
        5,
        [],
        3500,
        b.OK,
    ),
    (
        "rewinding, never recovering",
        commits((30, 1000, 5), (20, 2000, 5), (25, 3000, 5)),
        5,
        [],
        3500,
        b.REWIND,
    ),
    ("stalled", commits((10, 1000, 5), (10, 2000, 6), (10, 3000, 7)), 7, [], 3500, b.STALL),
    ("stopped", commits((10, 1000, 5), (20, 2000, 5), (30, 3000, 5)), 5, [], 9000, b.STOP),
    (
        "stopped, caught up recently",
        commits((10, 1000, 5), (20, 2000, 5), (30, 3000, 5)),
        5,
        [25, 30],
        9000,
        b.WARN,
    ),
    ("STOP is checked before REWIND", commits((30, 1000, 5), (20, 2000, 5)), 5, [], 9000, b.STOP),
    # -- the transitions Burrow 1.3.7+ decides differently from a Rule-1-first order
    # stopped on a quiet topic: caught up at 100 (end 100 for a long time), then a burst; once the
    # ring holds only ends after the burst, it is STOP ...
    (
        "quiet topic, stopped, burst in the ring only",
        commits((90, 1000, 10), (100, 2000, 0)),
        50,
        [150] * 10,
        60_000,
        b.STOP,
    ),
    # ... while the ring still holds an end at or below the newest commit, "caught up recently": OK
    (
        "quiet topic, burst just came",
        commits((90, 1000, 10), (100, 2000, 0)),
        50,
        [100] * 9 + [150],
        60_000,
        b.OK,
    ),
    # caught up, then reset backwards: REWIND, though the lag was zero in the window
    (
        "caught up, then reset backwards",
        commits((100, 1000, 0), (100, 2000, 0), (40, 3000, 60)),
        60,
        [100],
        3500,
        b.REWIND,
    ),
    # rewound and recovered past the old offset: the rewind is forgiven; lag never zero and not
    # decreasing: WARN
    (
        "rewound, recovered, slow",
        commits((50, 1000, 10), (30, 2000, 30), (60, 3000, 30)),
        30,
        [],
        3500,
        b.WARN,
    ),
    (
        "rewound, recovered, catching up",
        commits((50, 1000, 10), (30, 2000, 30), (60, 3000, 5)),
        5,
        [],
        3500,
        b.OK,
    ),
    (
        "rewound, back at the old offset",
        commits((50, 1000, 10), (30, 2000, 30), (50, 3000, 30)),
        30,
        [],
        3500,
        b.WARN,
    ),
    (
        "rewound, not yet back",
        commits((50, 1000, 10), (30, 2000, 30), (45, 3000, 30)),
        30,
        [],
        3500,
        b.REWIND,
    ),
    # keeping up against a steady producer: each commit's lag measured against the end read
    # *before* it (a few messages, sometimes 0) -- never the false WARN of ends read after it
    (
        "keeping up, steady producer",
        commits((100, 1000, 4), (110, 2000, 0), (120, 3000, 3)),
        2,
        [122],
        3500,
        b.OK,
    ),
    (
        "same, lags read after each commit",
        commits((100, 1000, 8), (110, 2000, 9), (120, 3000, 9)),
        2,
        [122],
        3500,
        b.WARN,
    ),
    # unknown lag (no end read before the commit) is skipped by Rules 1 and 5, as Burrow skips nil
    ("lags unknown, offsets moving", commits((10, 1000, None), (20, 2000, None)), 5, [], 2500, b.WARN),
]


@pytest.mark.parametrize(
    ("window", "lag", "recent", "now_ms", "status"),
    [row[1:] for row in STATUS],
    ids=[row[0] for row in STATUS],
)
def test_partition_status(window: list[int], lag: int, recent: list[int], now_ms: int, status: int) -> None:
    assert b.partition_status(window, lag, recent, now_ms) == status


def test_allowed_lag() -> None:
    """Burrow's ``allowed-lag`` (default 0): lag up to it counts as none."""
    w = commits((10, 1000, 3), (20, 2000, 3), (30, 3000, 3))
    assert b.partition_status(w, 3, [], 3500) == b.WARN
    assert b.partition_status(w, 3, [], 3500, allowed_lag=3) == b.OK
    assert b.partition_status(w, 4, [], 3500, allowed_lag=3) == b.OK  # Rule 1: lag 3 <= 3 in the window


@pytest.mark.parametrize(
    ("parts", "group"),
    [
        ([b.OK, b.OK], b.OK),
        ([b.OK, b.WARN], b.WARN),
        ([b.WARN, b.STOP], b.ERR),
        ([b.REWIND], b.ERR),
        ([b.STALL, b.OK], b.ERR),
        ([], b.OK),
    ],
)
def test_group_status_is_the_worst_capped_at_err(parts: list[int], group: int) -> None:
    assert b.group_status(parts) == group


# ------------------------------------------------------------- the window and the ring of ends
def _burrow(intervals: int = 10) -> tuple[LagTracker, Burrow]:
    tracker = LagTracker()
    return tracker, Burrow(tracker, "c", intervals, 0)


def _round(tracker: LagTracker, at_ms: int, ends: dict[tuple[str, int], int], took_ms: int = 100) -> None:
    parts = {tp: PartitionEnds(0, e, e) for tp, e in ends.items()}
    tracker.apply_round(LogOffsets(at_ms, parts, round_seconds=took_ms / 1000))


def _commit(tracker: LagTracker, burrow: Burrow, offset: int, ts: int, observed: int | None = None) -> None:
    """Group "g" (a simple group: offsets only) commits ``offset`` at ``ts``, as the sink applies it."""
    log = Log()
    log.commit("g", "t", 0, offset, commit_ts=ts)
    g = fold(None, log.records, group_id="g").group
    assert g is not None and g.offsets[("t", 0)][3] == ts
    burrow.history.record(tracker.apply_groups([("g", g)]), tracker, observed)


@pytest.mark.parametrize(
    ("commit_ts", "offset", "lag"),
    [
        (2150, 105, 5),  # the end read before it: 110 (round at 2000, read by 2100)
        (2050, 105, 0),  # round 2000 still reading at 2050: the one before (100) -> max(0, 100 - 105)
        (3500, 118, 2),  # the newest: 120
        (500, 95, 5),  # older than every sample: the oldest (100), the closest read after it
    ],
)
def test_lag_at_commit_is_against_the_end_read_before_it(commit_ts: int, offset: int, lag: int) -> None:
    """The latent difference: Burrow stores each commit's lag against the newest log end it held
    when the commit arrived -- read before the commit; never against one read after it."""
    tracker, burrow = _burrow()
    for at, end in ((1000, 100), (2000, 110), (3000, 120)):
        _round(tracker, at, {("t", 0): end})
    _commit(tracker, burrow, offset, commit_ts, observed=9000)
    window = burrow.history.window("g")
    assert window is not None and b.commits_of(window[("t", 0)]) == [(offset, commit_ts, lag, 9000)]


def test_lag_unknown_before_any_round() -> None:
    tracker, burrow = _burrow()
    _commit(tracker, burrow, 10, 1000)
    window = burrow.history.window("g")
    assert window is not None and b.commits_of(window[("t", 0)])[0][2] is None


def test_the_ring_keeps_the_last_intervals_ends_uncompressed_and_says_when_they_change() -> None:
    """The ring holds the last ``intervals`` ends, flat runs included, and reports for which
    committed offsets "caught up recently" (``min(ring) <= newest commit``) flipped."""
    tracker, burrow = _burrow(intervals=3)
    ring = burrow.ends
    tp = ("t", 0)
    for k in range(3):
        _round(tracker, 1000 * k, {tp: 100})
    assert list(ring.recent(tp)) == [100, 100, 100] and ring.take_changed() == {tp: None}  # new
    _round(tracker, 3000, {tp: 100})
    assert ring.take_changed() == {}  # a flat ring stays the same
    _round(tracker, 4000, {tp: 150})  # a burst
    assert list(ring.recent(tp)) == [100, 100, 150] and ring.take_changed() == {}  # min still 100
    _round(tracker, 5000, {tp: 150})
    assert ring.take_changed() == {}
    _round(tracker, 6000, {tp: 150})  # the last 100 dropped out: commits in [100, 150) flip
    assert list(ring.recent(tp)) == [150, 150, 150] and ring.take_changed() == {tp: (100, 150)}
    _round(tracker, 7000, {tp: 90})  # the end went back (a re-created topic): [90, 150) flip
    _round(tracker, 8000, {tp: 95})  # ranges of two rounds merge
    assert ring.take_changed() == {tp: (90, 150)}
    # kafka-lag-exporter's table, by contrast, keeps the old end (flat runs compressed)
    assert 100 in tracker.tables[tp].points[0::2]
    _round(tracker, 9000, {})  # the partition leaves the round: it leaves the ring
    assert list(ring.recent(tp)) == [] and ring.take_changed() == {tp: None}


def test_only_the_groups_whose_verdict_can_flip_are_evaluated_when_the_ring_moves() -> None:
    """A partition's ring moving past old ends re-evaluates the groups whose newest commit there
    lies where "caught up recently" flipped -- not every group on the partition."""
    tracker, burrow = _burrow(intervals=3)
    tp = ("t", 0)
    _round(tracker, 0, {tp: 100})
    for gid, offset in (("behind", 120), ("caught-up", 200)):
        log = Log()
        log.commit(gid, "t", 0, offset, commit_ts=500)
        g = fold(None, log.records, group_id=gid).group
        assert g is not None
        burrow.history.record(tracker.apply_groups([(gid, g)]), tracker)
    burrow.evaluate_all(1000)
    for k in range(2):  # the end moves once, then stays: the ring is [100, 200, 200]
        _round(tracker, 2000 + 1000 * k, {tp: 200})
        burrow.evaluate_all(2000 + 1000 * k)
    assert burrow.watcher.partitions[("behind", "t", 0)] == b.OK  # stopped, but caught up recently
    # the round where the 100 drops out: min 100 -> 200 flips commits in [100, 200)
    _round(tracker, 4000, {tp: 200})
    burrow.evaluate_all(4000)
    assert burrow.last_evaluated == 1  # "behind" (120), not "caught-up" (200)
    assert burrow.watcher.partitions[("behind", "t", 0)] == b.STOP


def test_stopped_on_a_quiet_topic_through_the_tracker() -> None:
    """A consumer caught up on a quiet topic stops committing; a burst arrives.  OK while the ring
    still holds an end it had reached, STOP once ``intervals`` rounds have passed since the burst
    (Burrow's verdict) -- the lookup table's compressed history would say OK for good."""
    tracker, burrow = _burrow(intervals=10)
    tp = ("t", 0)
    _round(tracker, 0, {tp: 100})
    _commit(tracker, burrow, 90, 1000)
    _round(tracker, 2000, {tp: 100})
    _commit(tracker, burrow, 100, 3000)  # caught up; then no more commits
    statuses = []
    for k in range(1, 30):
        end = 100 if k < 10 else 150  # the burst at round 10
        _round(tracker, 3000 + 1000 * k, {tp: end})
        burrow.evaluate_all(3000 + 1000 * k)
        statuses.append(burrow.watcher.partitions[("g", "t", 0)])
    assert statuses[:9] == [b.OK] * 9  # no lag
    assert statuses[9:18] == [b.OK] * 9  # lag, stopped by Rule 3, but caught up recently
    assert statuses[18:] == [b.STOP] * 11


def test_lookup_table_follows_kafka_lag_exporter() -> None:
    t = LookupTable(limit=4)
    for offset, ms in [(100, 1000), (200, 2000), (200, 3000), (200, 4000), (300, 5000)]:
        t.add(offset, ms)
    # the flat run 200@2000..200@4000 is one segment (its right end moved out)
    assert t.points.tolist() == [100, 1000, 200, 2000, 200, 4000, 300, 5000]
    t.add(250, 6000)  # not monotonic: ignored
    t.add(400, 5000)  # out of order: ignored
    assert len(t) == 4
    assert t.predict_ms(150) == 1500  # interpolated
    assert t.predict_ms(250) == 4500
    assert t.predict_ms(50) == pytest.approx(1000 - 50 * 4000 / 200)  # extrapolated along the window
    assert lag_seconds(300, t, 7000) == 0.0  # at the newest end
    assert lag_seconds(150, t, 7000) == pytest.approx(5.5)
    assert math.isnan(lag_seconds(150, LookupTable(), 7000))
    flat = LookupTable()
    for ms in (1000, 2000, 3000):  # an idle topic sampled since 1000, end 200, consumer at 150
        flat.add(200, ms)
    assert flat.points.tolist() == [200, 1000, 200, 3000]
    assert lag_seconds(150, flat, 4000) == 3.0  # at least since the first sample, never ~0
    t.add(500, 7000)  # the window slides
    assert t.points.tolist()[:2] == [200, 2000]
    assert lag_messages(10, 5) == 0 and lag_messages(5, 10) == 5


def test_group_filter_marks_filtered_groups_and_keeps_records_without_a_group() -> None:
    keep = GroupFilter(r"app-.*", r"app-test-.*")
    batch = pa.RecordBatch.from_pydict(
        {"group_id": ["app-1", "app-test-1", "other", None], "packed": [b"a", b"b", b"c", b"d"]}
    )
    out = filter_packed(batch, keep)
    assert out.column("packed").to_pylist() == [b"a", b"", b"", b"d"]
    assert not GroupFilter(None, None)
    assert filter_packed(batch, GroupFilter(None, "zzz")) is batch
