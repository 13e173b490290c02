"""The offset history (`streaming.serving.offset_history`): points from real state bytes as the sink
hands them over, answers as of a moment, thinning with age, the horizon, deleted and re-created
groups, and persistence -- snapshot, journal, a crash between the two, the seed at start.

Groups are folded from record lists (`lab.records.Log`) and handed over as the sink's rows; time
is an argument (an injected clock), nothing sleeps."""

from __future__ import annotations

import json
from collections import namedtuple
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lab.records import Log
from state import codec
from state.model import Group
from state.replay import fold
from state.snapshot import summary
from streaming.health.lag import LagTracker
from streaming.health.retention import RetentionWatch
from streaming.serving.offset_history import (
    NO_OFFSET,
    SNAPSHOT,
    HistoryError,
    OffsetHistory,
    pack,
    thin,
    unpack,
)

Row = namedtuple("Row", "group_id kind key body summary blob")
MIN = 60_000
HOUR = 60 * MIN
TIERS = [(10 * MIN, 0), (2 * HOUR, 5 * MIN), (24 * HOUR, 30 * MIN)]
#: ids from both base64 alphabets, "-", "/", unicode and HTML
IDS = ["g-plain", "a+b/c=", "a-b_c", "tenant/orders", "grüppe ✓", "<b>x</b>&amp;"]


class Clock:
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


def snapshot_row(g: Group) -> Row:
    return Row(g.group_id, "snapshot", None, None, json.dumps(summary(g)), codec.encode(g))


def committed(log: Log, gid: str, offsets: dict[tuple[str, int], int], group: Group | None = None) -> Group:
    """``group`` after commits of ``offsets`` at the log's time."""
    for (t, p), o in offsets.items():
        log.commit(gid, t, p, o)
    recs, log.records = log.records, []
    g = fold(group.copy() if group is not None else None, recs).group
    assert g is not None
    return g


def history(clock: Clock, path: Path | None = None, **kw: Any) -> OffsetHistory:
    return OffsetHistory(TIERS, 24 * HOUR, path, clock_ms=clock, **kw)


# ---------------------------------------------------------------------------------- pure parts
def test_pack_round_trips_any_points() -> None:
    rng = np.random.default_rng(7)
    t = rng.integers(1_790_000_000_000, 1_790_100_000_000, 500)
    idx = rng.integers(0, 50, 500)
    off = rng.integers(-1, 10**12, 500)
    back = unpack(pack(t, idx, off))
    want = sorted(zip(idx.tolist(), t.tolist(), off.tolist(), strict=True))
    got = sorted(zip(back[1].tolist(), back[0].tolist(), back[2].tolist(), strict=True))
    assert got == want
    assert unpack(pack(t[:0], idx[:0], off[:0]))[0].size == 0


def test_thin_keeps_recent_points_and_the_newest_per_step() -> None:
    now = 100 * HOUR
    # one partition, a point a minute for 30 hours
    t = np.array([now - k * MIN for k in range(30 * 60)][::-1], dtype=np.int64)
    idx = np.zeros(len(t), dtype=np.int64)
    kept = t[thin(t, idx, now, TIERS, 24 * HOUR)]
    ages = now - kept
    assert list(ages[ages < 10 * MIN]) == [k * MIN for k in range(9, -1, -1)]  # all of the newest tier
    mid = kept[(ages >= 10 * MIN) & (ages < 2 * HOUR)]
    assert len(np.unique(mid // (5 * MIN))) == len(mid)  # one per 5-minute step
    # each step's newest point: its last minute (the youngest step reaches into the newest tier)
    assert all((x + MIN) // (5 * MIN) != x // (5 * MIN) for x in mid[:-1])
    old = kept[(ages >= 2 * HOUR) & (ages < 24 * HOUR)]
    # one per 30-minute step, and the partition's oldest point within the horizon besides
    assert old[0] == t[t > now - 24 * HOUR].min()
    assert len(np.unique(old[1:] // (30 * MIN))) == len(old) - 1
    assert len(kept[ages >= 24 * HOUR]) == 1  # past the horizon: the newest only
    assert kept[ages >= 24 * HOUR][0] == t[t <= now - 24 * HOUR].max()


def test_thin_works_per_partition() -> None:
    """Per partition: in one 30-minute step the newest point, and the oldest (the partition's first)."""
    now = 10 * HOUR
    base = now - 3 * HOUR - (now - 3 * HOUR) % (30 * MIN)
    t = np.array([base, base + MIN, base + 2 * MIN] * 2, dtype=np.int64)
    idx = np.array([0, 0, 0, 1, 1, 1], dtype=np.int64)
    assert sorted(thin(t, idx, now, TIERS, 24 * HOUR).tolist()) == [0, 2, 3, 5]
    # a later step of partition 1 drops nothing of partition 0
    t2 = np.append(t, base + 40 * MIN)
    idx2 = np.append(idx, 1)
    assert sorted(thin(t2, idx2, now, TIERS, 24 * HOUR).tolist()) == [0, 2, 3, 5, 6]


# ------------------------------------------------------------------------------------- answers
@pytest.mark.parametrize("gid", IDS)
def test_offsets_as_of_any_moment(gid: str) -> None:
    log = Log()
    clock = Clock(log.now_ms)
    h = history(clock)
    g = None
    steps = []
    for k in range(6):
        g = committed(log, gid, {("t", 0): 10 * k, ("t", 1): 100 + k, ("u/v", 0): 7}, g)
        clock.ms = log.now_ms
        h.on_batch(k, [snapshot_row(g)])
        steps.append(log.now_ms)
        log.tick(30_000)
    clock.ms = log.now_ms
    for k, at in enumerate(steps):
        got = h.at(gid, at + 15_000)
        by = {(x.topic, x.partition): (x.offset, x.committed_ms, x.offset_now) for x in got.partitions}
        assert by == {("t", 0): (10 * k, at, 50), ("t", 1): (100 + k, at, 105), ("u/v", 0): (7, steps[0], 7)}
        assert got.resolution_ms == 0 and got.kind == "simple"
    # a moment between two commits answers the older one; the commit's own moment the newer
    assert {x.offset for x in h.at(gid, steps[2]).partitions if x.topic == "t" and x.partition == 0} == {20}
    assert {x.offset for x in h.at(gid, steps[2] - 1).partitions if x.topic == "t" and x.partition == 0} == {
        10
    }


def test_a_deleted_offset_and_group_say_so() -> None:
    log = Log()
    clock = Clock(log.now_ms)
    h = history(clock)
    g = committed(log, "g", {("t", 0): 5, ("t", 1): 6})
    h.on_batch(0, [snapshot_row(g)])
    t_both = log.now_ms
    log.tick(MIN)
    log.offset_tombstone("g", "t", 1)
    g2 = fold(g.copy(), log.records).group
    log.records = []
    assert g2 is not None
    clock.ms = log.now_ms
    h.on_batch(1, [snapshot_row(g2)])
    t_one = log.now_ms
    log.tick(MIN)
    clock.ms = log.now_ms
    h.on_batch(2, [Row("g", "deleted", None, json.dumps(summary(g2)), None, None)])
    t_gone = log.now_ms
    log.tick(MIN)
    clock.ms = log.now_ms
    assert {(x.partition, x.offset) for x in h.at("g", t_both).partitions} == {(0, 5), (1, 6)}
    # a partition without an offset then and now is left out
    assert {(x.partition, x.offset) for x in h.at("g", t_one).partitions} == {(0, 5)}
    with pytest.raises(HistoryError) as err:
        h.at("g", t_gone + 1)
    assert (err.value.status, err.value.error, err.value.fields["reason"]) == (404, "group_not_at", "deleted")
    with pytest.raises(HistoryError) as err:
        h.at("g", t_both - 1)  # before it was first seen (and the history began recording)
    assert err.value.status == 410
    with pytest.raises(HistoryError) as err:
        h.at("nobody", t_both)
    assert (err.value.status, err.value.fields["reason"]) == (404, "unknown")


def test_a_group_created_after_the_moment_is_404_with_why() -> None:
    log = Log()
    clock = Clock(log.now_ms)
    h = history(clock)
    h.on_batch(0, [snapshot_row(committed(log, "old", {("t", 0): 1}))])
    t0 = log.now_ms
    log.tick(10 * MIN)
    clock.ms = log.now_ms
    h.on_batch(1, [snapshot_row(committed(log, "new", {("t", 0): 1}))])
    log.tick(MIN)
    clock.ms = log.now_ms
    with pytest.raises(HistoryError) as err:
        h.at("new", t0 + MIN)
    assert (err.value.status, err.value.fields["reason"]) == (404, "not_created_yet")
    assert "first seen" in err.value.message


def test_horizon_and_future_are_refused_naming_the_limit() -> None:
    log = Log()
    clock = Clock(log.now_ms)
    h = OffsetHistory(TIERS, 2 * HOUR, None, clock_ms=clock)
    g = committed(log, "g", {("t", 0): 1})
    h.on_batch(0, [snapshot_row(g)])
    clock.ms += 5 * HOUR
    with pytest.raises(HistoryError) as err:
        h.at("g", clock.ms - 3 * HOUR)
    assert err.value.status == 410 and err.value.fields["horizon_ms"] == clock.ms - 2 * HOUR
    assert "horizon" in err.value.message and "7200 s" in err.value.message
    with pytest.raises(HistoryError) as err:
        h.at("g", clock.ms + 1)
    assert err.value.status == 400
    assert h.at("g", clock.ms - HOUR).partitions[0].offset == 1


def test_thinning_keeps_the_answers_within_their_resolution() -> None:
    log = Log()
    clock = Clock(log.now_ms)
    h = history(clock)
    g = None
    commits = []
    for k in range(12 * 60):  # a commit a minute for 12 hours
        g = committed(log, "g", {("t", 0): k}, g)
        clock.ms = log.now_ms
        h.on_batch(k, [snapshot_row(g)])
        commits.append(log.now_ms)
        log.tick(MIN)
        if k % 60 == 0:
            h.maintain()
    clock.ms = log.now_ms
    h.maintain()
    points = h.point_count()
    assert points < 10 + 110 / 5 + 10 * 2 + 5, points  # the tiers' budget, not 720
    for k, at in enumerate(commits):
        got = h.at("g", at + 30_000)
        offset = got.partitions[0].offset
        assert offset is not None
        assert k - got.resolution_ms // MIN <= offset <= k, (k, offset, got.resolution_ms)
        assert got.partitions[0].committed_ms == commits[offset]


# ---------------------------------------------------------------------------------- persistence
def test_it_survives_a_restart_snapshot_and_journal(tmp_path: Path) -> None:
    log = Log()
    clock = Clock(log.now_ms)
    h = history(clock, tmp_path)
    g = None
    moments = []
    for k in range(4):
        g = committed(log, "g/ü", {("t", 0): k, ("t", 1): 2 * k}, g)
        clock.ms = log.now_ms
        h.on_batch(k, [snapshot_row(g)])
        moments.append(log.now_ms)
        if k == 1:
            h.save()  # a snapshot, then two batches only in the journal
        log.tick(MIN)
    clock.ms = log.now_ms
    want = [h.at("g/ü", m) for m in moments]
    # a crash: no final save; the journal was written before each batch returned
    again = history(clock, tmp_path)
    assert again.load() == 1
    assert [again.at("g/ü", m) for m in moments] == want
    again.stop()  # a clean stop: one snapshot, no journal left
    assert [p.name for p in tmp_path.iterdir()] == ["snapshot.msgpack.z"]
    third = history(clock, tmp_path)
    third.load()
    assert [third.at("g/ü", m) for m in moments] == want
    assert third.recording_since_ms == h.recording_since_ms


def test_a_snapshot_with_nothing_new_is_not_written_again(tmp_path: Path) -> None:
    """A quiet cluster's history is not rewritten every ``save_interval_s``: a save writes only
    after a batch, a settle (points packed and thinned) or new retention counts."""
    log = Log()
    clock = Clock(log.now_ms)
    watch = RetentionWatch(LagTracker())
    h = history(clock, tmp_path, retention=watch)
    snap = tmp_path / SNAPSHOT
    g = committed(log, "a+b/c=", {("t", 0): 1})
    h.on_batch(0, [snapshot_row(g)])
    h.save()
    written = snap.stat().st_ino
    h.maintain()
    h.save()
    assert snap.stat().st_ino == written  # nothing new: the same file
    log.tick(MIN)
    g = committed(log, "a+b/c=", {("t", 0): 2}, g)
    clock.ms = log.now_ms
    h.on_batch(1, [snapshot_row(g)])
    h.save()  # a batch: written (the new file is made while the old one is still there)
    assert snap.stat().st_ino != written and sorted(p.name for p in tmp_path.iterdir()) == [SNAPSHOT]
    written = snap.stat().st_ino
    watch.load([["a+b/c=", "t", 0, 5, 7]])
    h.save()  # new retention counts: written
    assert snap.stat().st_ino != written
    written = snap.stat().st_ino
    clock.ms += 3 * HOUR
    assert h.maintain() == 1  # the points settle: written
    h.save()
    assert snap.stat().st_ino != written
    written = snap.stat().st_ino
    h.save()
    assert snap.stat().st_ino == written
    again = history(clock, tmp_path, retention=RetentionWatch(LagTracker()))
    assert again.load() == 1 and again.at("a+b/c=", log.now_ms) == h.at("a+b/c=", log.now_ms)
    assert again.retention is not None and again.retention.to_json() == [["a+b/c=", "t", 0, 5, 7]]


def test_a_torn_journal_tail_is_read_up_to_the_tear(tmp_path: Path) -> None:
    log = Log()
    clock = Clock(log.now_ms)
    h = history(clock, tmp_path)
    g = committed(log, "g", {("t", 0): 1})
    h.on_batch(0, [snapshot_row(g)])
    t1 = log.now_ms
    log.tick(MIN)
    h.on_batch(1, [snapshot_row(committed(log, "g", {("t", 0): 2}, g))])
    journal = next(tmp_path.glob("journal-*"))
    journal.write_bytes(journal.read_bytes()[:-3])  # the last batch's entry cut short
    again = history(clock, tmp_path)
    again.load()
    clock.ms = log.now_ms + MIN
    assert again.at("g", t1).partitions[0].offset == 1


def test_the_seed_catches_up_with_the_store_after_a_restart(tmp_path: Path) -> None:
    """Commits folded while the history was not fed (or offsets of a group deleted meanwhile) are
    found by the first batch's comparison with every group the store holds."""
    log = Log()
    clock = Clock(log.now_ms)
    a = committed(log, "a", {("t", 0): 1})
    b = committed(log, "b", {("t", 0): 1})
    h = history(clock, tmp_path, states=lambda: [("a", codec.encode(a)), ("b", codec.encode(b))])
    h.on_batch(0, [])
    h.stop()
    log.tick(MIN)
    a2 = committed(log, "a", {("t", 0): 9}, a)  # folded by the catch-up, never a batch row here
    t_a2 = log.now_ms
    log.tick(MIN)
    clock.ms = log.now_ms
    again = history(clock, tmp_path, states=lambda: [("a", codec.encode(a2))])  # b is gone
    again.load()
    again.on_batch(7, [])
    assert again.at("a", t_a2).partitions[0].offset == 9
    with pytest.raises(HistoryError) as err:
        again.at("b", clock.ms)
    assert err.value.fields["reason"] == "deleted"


def test_no_new_point_for_an_unchanged_offset() -> None:
    log = Log()
    clock = Clock(log.now_ms)
    h = history(clock)
    g = committed(log, "g", {("t", 0): 3})
    for k in range(5):
        log.tick(1000)
        g = committed(log, "g", {("t", 0): 3}, g)  # re-committed, same offset
        h.on_batch(k, [snapshot_row(g)])
    assert h.points_added == 1
    assert NO_OFFSET == -1


def test_with_its_thread_the_sink_only_queues_and_every_reader_sees_the_batch(tmp_path: Path) -> None:
    """While the history's thread runs, the sink's hook queues the rows and returns (reading 10k
    groups' offsets on the sink's path cost ~2 s a batch); the thread folds and journals them, and a
    question, the upkeep or the stop folds whatever is still queued first -- in the batches' order."""
    log = Log()
    clock = Clock(log.now_ms)
    h = history(clock, tmp_path, save_interval_s=3600.0)
    h.start()
    try:
        g = None
        moments = []
        with h._lock:  # the history busy (a snapshot, an answer): the sink's hook does not wait
            for k in range(3):
                g = committed(log, "a+b/c=", {("t", 0): 5 * k}, g)
                clock.ms = log.now_ms
                h.on_batch(k, [snapshot_row(g)])
                moments.append(log.now_ms)
                log.tick(MIN)
            assert len(h._pending) == 3 and h.groups == {}  # queued, not folded on the sink's path
            clock.ms = log.now_ms
            assert [x.offset for m in moments for x in h.at("a+b/c=", m).partitions] == [0, 5, 10]
            assert h._pending == []
    finally:
        h.stop()
    again = history(clock, tmp_path)
    again.load()
    assert [x.offset for m in moments for x in again.at("a+b/c=", m).partitions] == [0, 5, 10]


def test_the_thread_folds_and_journals_what_the_sink_queued(tmp_path: Path) -> None:
    """The thread folds a queued batch as it comes and journals it (no question, no stop): a crash
    after that loses nothing."""
    import time

    log = Log()
    clock = Clock(log.now_ms)
    h = history(clock, tmp_path, save_interval_s=3600.0)
    h.start()
    try:
        g = committed(log, "tenant/orders", {("t", 0): 42})
        clock.ms = log.now_ms
        h.on_batch(0, [snapshot_row(g)])
        deadline = time.monotonic() + 10
        while h._pending or "tenant/orders" not in h.groups:
            assert time.monotonic() < deadline, "the thread did not fold the queued batch"
            time.sleep(0.01)
        crashed = history(clock, tmp_path)  # no stop, no snapshot: the journal alone
        crashed.load()
        assert [x.offset for x in crashed.at("tenant/orders", log.now_ms).partitions] == [42]
    finally:
        h.stop()
