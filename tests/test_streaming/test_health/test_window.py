"""Burrow's storage (`streaming.health.window`): a commit's lag against the newest log end read
before it, the ring of the last intervals' sampled ends (flat runs kept, the ranges where "caught up
recently" flipped), and Rule 3's verdict on a quiet topic through the tracker."""

from __future__ import annotations

import random

import pytest

from decoders.uuids import kafka_uuid
from lab.records import Log
from state.replay import fold
from streaming.health import rules as b
from streaming.health.lag import LagTracker, LogOffsets, PartitionEnds
from streaming.health.window import STRIDE, CommitHistory, GroupWindows, SampledEnds, commits_of, window_of
from tests.support.burrow import commit, end_round, tracked_burrow


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
    tracker, burrow = tracked_burrow()
    for at, end in ((1000, 100), (2000, 110), (3000, 120)):
        end_round(tracker, at, {("t", 0): end})
    commit(tracker, burrow, offset, commit_ts, observed=9000)
    window = burrow.history.window("g")
    assert window is not None and b.commits_of(window[("t", 0)]) == [(offset, commit_ts, lag, 9000)]


def test_lag_unknown_before_anyend_round() -> None:
    tracker, burrow = tracked_burrow()
    commit(tracker, burrow, 10, 1000)
    window = burrow.history.window("g")
    assert window is not None and b.commits_of(window[("t", 0)])[0][2] is None


def test_the_ring_keeps_the_last_intervals_ends_uncompressed_and_says_when_they_change() -> None:
    """The ring holds the last ``intervals`` ends, flat runs included, and reports for which
    committed offsets "caught up recently" (``min(ring) <= newest commit``) flipped."""
    tracker, burrow = tracked_burrow(intervals=3)
    ring = burrow.ends
    tp = ("t", 0)
    for k in range(3):
        end_round(tracker, 1000 * k, {tp: 100})
    assert list(ring.recent(tp)) == [100, 100, 100] and ring.take_changed() == {tp: None}  # new
    end_round(tracker, 3000, {tp: 100})
    assert ring.take_changed() == {}  # a flat ring stays the same
    end_round(tracker, 4000, {tp: 150})  # a burst
    assert list(ring.recent(tp)) == [100, 100, 150] and ring.take_changed() == {}  # min still 100
    end_round(tracker, 5000, {tp: 150})
    assert ring.take_changed() == {}
    end_round(tracker, 6000, {tp: 150})  # the last 100 dropped out: commits in [100, 150) flip
    assert list(ring.recent(tp)) == [150, 150, 150] and ring.take_changed() == {tp: (100, 150)}
    end_round(tracker, 7000, {tp: 90})  # the end went back (a re-created topic): [90, 150) flip
    end_round(tracker, 8000, {tp: 95})  # ranges of two rounds merge
    assert ring.take_changed() == {tp: (90, 150)}
    # kafka-lag-exporter's table, by contrast, keeps the old end (flat runs compressed)
    assert 100 in tracker.tables[tp].points[0::2]
    end_round(tracker, 9000, {})  # the partition leaves the round: it leaves the ring
    assert list(ring.recent(tp)) == [] and ring.take_changed() == {tp: None}


def test_stopped_on_a_quiet_topic_through_the_tracker() -> None:
    """A consumer caught up on a quiet topic stops committing; a burst arrives.  OK while the ring
    still holds an end it had reached, STOP once ``intervals`` rounds have passed since the burst
    (Burrow's verdict) -- the lookup table's compressed history would say OK for good."""
    tracker, burrow = tracked_burrow(intervals=10)
    tp = ("t", 0)
    end_round(tracker, 0, {tp: 100})
    commit(tracker, burrow, 90, 1000)
    end_round(tracker, 2000, {tp: 100})
    commit(tracker, burrow, 100, 3000)  # caught up; then no more commits
    statuses = []
    for k in range(1, 30):
        end = 100 if k < 10 else 150  # the burst at round 10
        end_round(tracker, 3000 + 1000 * k, {tp: end})
        burrow.evaluate_all(3000 + 1000 * k)
        statuses.append(burrow.watcher.partitions["g"][("t", 0)])
    assert statuses[:9] == [b.OK] * 9  # no lag
    assert statuses[9:18] == [b.OK] * 9  # lag, stopped by Rule 3, but caught up recently
    assert statuses[18:] == [b.STOP] * 11


# ------------------------------------------------------------------------------ directly
def test_the_flat_window_and_back() -> None:
    flat = window_of([(10, 1000, 5), (20, 2000, None), (30, 3000, 0, 3500)])
    assert flat == [10, 1000, 5, 1000, 20, 2000, -1, 2000, 30, 3000, 0, 3500]
    assert commits_of(flat) == [(10, 1000, 5, 1000), (20, 2000, None, 2000), (30, 3000, 0, 3500)]
    assert commits_of(window_of(commits_of(flat))) == commits_of(flat)


def test_end_before_is_the_newest_sample_read_by_then() -> None:
    ring = SampledEnds(3, lambda e: e.high_watermark)
    tp = ("t", 0)
    assert ring.end_before(tp, 5000) is None
    for at, end in ((1000, 100), (2000, 110), (3000, 120)):
        ring.add_round(LogOffsets(at, {tp: PartitionEnds(0, end, end)}, round_seconds=0.1))
    # each sample counts from the time its round had finished reading (at + 100 ms)
    assert [ring.end_before(tp, t) for t in (500, 1099, 1100, 2099, 2100, 9999)] == [
        100,
        100,
        100,
        100,
        110,
        120,
    ]


def _history(intervals: int = 3, min_distance_s: float = 1.0) -> tuple[LagTracker, CommitHistory]:
    tracker = LagTracker()
    ring = SampledEnds(intervals, lambda e: e.high_watermark)
    tracker.listeners.append(ring.add_round)
    return tracker, CommitHistory(ring, intervals, min_distance_s)


def _commits(tracker: LagTracker, history: CommitHistory, gid: str, *commits: tuple[int, int]) -> None:
    for offset, ts in commits:
        log = Log()
        log.commit(gid, "t", 0, offset, commit_ts=ts)
        g = fold(None, log.records, group_id=gid).group
        history.record(tracker.apply_groups([(gid, g)]), tracker, now_ms=ts + 1)


def test_the_window_keeps_the_last_intervals_commits_and_merges_close_ones() -> None:
    tracker, history = _history(intervals=3, min_distance_s=1.0)
    _commits(tracker, history, "g", (10, 1000), (11, 1500), (20, 3000), (30, 5000), (40, 7000))
    window = history.window("g")
    assert window is not None
    # 11 @1500 replaced 10 @1000 (within Burrow's min distance: its time kept); 3 newest kept
    kept = [(o, t) for o, t, _, _ in commits_of(window[("t", 0)])]
    assert kept == [(20, 3000), (30, 5000), (40, 7000)]
    _commits(tracker, history, "g", (40, 7000))  # the same commit again: nothing appended
    assert history.window("g") == window
    assert history.memory_entries() == 3 and history.groups() == ["g"]


def test_what_changed_since_the_last_evaluation() -> None:
    tracker, history = _history()
    _commits(tracker, history, "a", (100, 1000))
    _commits(tracker, history, "b", (200, 1000))
    assert history.take_dirty() == {"a", "b"} and history.take_dirty() == set()
    tp = ("t", 0)
    assert history.touching({tp}) == {"a", "b"} and history.touching(set()) == set()
    assert history.touching({("other", 0)}) == set()
    assert history.newest_between({tp: (100, 200)}) == {"a"}
    assert history.newest_between({tp: (150, 250)}) == {"b"} and history.newest_between({}) == set()
    history.record([("a", None)], tracker)  # deleted
    assert history.window("a") is None and history.take_dirty() == {"a"}


@pytest.mark.parametrize("seed", range(10))
def test_packed_group_windows_give_back_what_was_packed(seed: int) -> None:
    """`GroupWindows` (one group's windows in one array): every window back as it was given, in
    order, with its newest offset and `Span` -- empty groups, empty windows, windows of 1 to 12
    commits, offsets and times across int64's range, topic names and ids alike."""
    rng = random.Random(seed)
    windows: dict[tuple[str, int], list[int]] = {}
    for p in range(rng.choice([0, 1, 7, 60])):
        topic = rng.choice(["t", "a-b.c_d", kafka_uuid(bytes([p % 256]) * 15 + b"\xff")])
        n = rng.choice([0, 1, 2, 12])
        windows[(topic, p)] = [rng.randrange(-1, 2**63) for _ in range(STRIDE * n)]
    g = GroupWindows(windows)
    assert {tp: a.tolist() for tp, a in g.items()} == windows and list(g.keys) == list(windows)
    assert dict(g.newest()) == {tp: w[-STRIDE] for tp, w in windows.items() if w}
    assert g.spans() == {
        tp: (len(w) // STRIDE, (w[1], w[0]), (w[-3], w[-4]), w[-2], w[-1]) for tp, w in windows.items() if w
    }
    assert g.commits() == sum(len(w) for w in windows.values()) // STRIDE
