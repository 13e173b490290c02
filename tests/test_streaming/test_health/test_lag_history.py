"""The lag history (`streaming.health.lag_history`): its newest point is what the tracker's lag rows
(``GET /groups/{id}/lag``) say at that round -- also for the groups whose row it reused instead of
computing it again -- round after round over groups that keep up, fall behind, stop, rewind, are
deleted and come back and partitions whose end moves, stays flat or leaves the round; then the
thinning with age (one point a minute, the minute's largest values), the horizon, and the
packing of idle minutes (seeded, property-style, like the incremental Burrow
tests in tests/test_streaming/test_serving/test_burrow.py)."""

from __future__ import annotations

import itertools
import math
import random
from typing import Any

import numpy as np
import pytest

from lab.synthetic import stable_classic
from state.model import Group
from streaming.health.lag import LagTracker, LogOffsets, PartitionEnds
from streaming.health.lag_history import (
    BUCKET_MS,
    CAUGHT_UP,
    FULL_RESOLUTION_MS,
    UNKNOWN,
    LagHistory,
    pack,
    thin,
    unpack,
)

BEHAVIOURS = ("keeps_up", "slow", "stopped", "rewinds", "idle_topic")
T0 = 1_700_000_000_000


def _oracle(tracker: LagTracker, gid: str) -> tuple[int | None, float | None, dict[tuple[str, int], Any]]:
    """(group lag, group lag in seconds, per partition (lag, seconds)) from the tracker's rows, as
    the lag exporter sums them (abandoned topics left out, unknown values skipped)."""
    rows = tracker.group_lag(gid)
    assert rows is not None
    kept = [r for r in rows if not r.abandoned]
    lags = [r.lag for r in kept if not math.isnan(r.lag)]
    secs = [r.lag_seconds for r in kept if not math.isnan(r.lag_seconds)]
    per = {
        (r.topic, r.partition): (
            None if math.isnan(r.lag) else int(r.lag),
            None if math.isnan(r.lag_seconds) else r.lag_seconds,
        )
        for r in rows
    }
    return (int(sum(lags)) if lags else None), (max(secs) if secs else None), per


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= 0.0015  # since is kept in whole milliseconds


@pytest.mark.parametrize("seed", range(6))
def test_newest_point_is_the_lag_api_at_every_round(seed: int) -> None:
    rnd = random.Random(seed)
    tracker = LagTracker(lookup_points=rnd.choice((3, 10, 60)))
    history = LagHistory(tracker, minutes=30, interval_s=1.0)
    groups: dict[str, Group] = {}
    behaviour: dict[tuple[str, tuple[str, int]], str] = {}
    for i in range(10):
        g = stable_classic(f"g{seed}-{i}", rnd.choice((2, 4, 6)), topics=2)
        groups[g.group_id] = g
        for tp in g.offsets:
            behaviour[(g.group_id, tp)] = rnd.choice(BEHAVIOURS)
    # and one group at the end of a quiet topic: its row is reused round after round
    steady = stable_classic(f"steady{seed}", 2, topics=1)
    tracker.apply_groups([*groups.items(), (steady.group_id, steady)])
    ends = {tp: e[0] + rnd.randrange(0, 50) for g in groups.values() for tp, e in g.offsets.items()}
    ends.update({tp: e[0] for tp, e in steady.offsets.items()})
    reused = 0
    now = T0
    deleted: set[str] = set()
    gone_topic: str | None = None
    for n in range(150):
        now += rnd.choice((500, 1000, 1000, 2000, 5000, 15_000))
        for tp in ends:
            idle = tp[0].startswith("steady") or any(
                b == "idle_topic" for (_, t), b in behaviour.items() if t == tp
            )
            if not idle and rnd.random() < 0.5:
                ends[tp] += rnd.randrange(1, 30)
        gone_topic = (
            rnd.choice(sorted({t for t, _ in ends})) if n % 50 == 20 else None if n % 50 == 30 else gone_topic
        )
        changed: list[tuple[str, Group | None]] = []
        for gid, g in groups.items():
            if gid in deleted or rnd.random() < 0.5:
                continue  # most groups keep their view: their row is reused
            for tp, e in list(g.offsets.items()):
                b = behaviour[(gid, tp)]
                off = e[0]
                if b in ("keeps_up", "idle_topic"):
                    off = ends[tp]
                elif b == "slow":
                    off = min(ends[tp], off + rnd.randrange(0, 10))
                elif b == "rewinds":
                    off = max(0, off - rnd.randrange(1, 40)) if rnd.random() < 0.2 else min(ends[tp], off + 5)
                g.offsets[tp] = (off, e[1], e[2], now - rnd.randrange(0, 400), *e[4:])
            changed.append((gid, g.copy()))
        if n % 30 == 15:
            victim = rnd.choice(sorted(set(groups) - deleted))
            deleted.add(victim)
            changed.append((victim, None))
        if n % 30 == 25 and deleted:
            back = sorted(deleted)[0]
            deleted.discard(back)
            changed.append((back, groups[back].copy()))
        tracker.apply_groups(changed)
        parts = {tp: PartitionEnds(0, end, end) for tp, end in ends.items() if tp[0] != gone_topic}
        tracker.apply_round(
            LogOffsets(now, parts, missing_topics=frozenset({gone_topic} if gone_topic else ()))
        )
        reused += len(tracker.groups) - history.last_computed
        for gid in [*groups, steady.group_id]:
            if gid in deleted:
                assert history.series(gid) is None and history.latest(gid) is None
                continue
            lag, secs, per = _oracle(tracker, gid)
            got = history.series(gid)
            assert got is not None and got["times_ms"][-1] == now
            assert got["lag"][-1] == lag, (n, gid)
            assert _close(got["lag_seconds"][-1], secs), (n, gid, got["lag_seconds"][-1], secs)
            assert history.latest(gid) is not None
            newest = {
                (p["topic"], p["partition"]): (p["lag"][-1], p["lag_seconds"][-1]) for p in got["partitions"]
            }
            assert newest.keys() == per.keys()
            for key, (want_lag, want_secs) in per.items():
                assert newest[key][0] == want_lag and _close(newest[key][1], want_secs), (n, gid, key)
    # the steady group's rows (at least) were reused, not computed again
    assert reused >= 140


def test_thinned_with_age_and_bounded_by_the_horizon() -> None:
    tracker = LagTracker()
    history = LagHistory(tracker, minutes=20, interval_s=10.0)
    g = stable_classic("thin", 2, topics=1)
    tracker.apply_groups([("thin", g)])
    (tp0, e0), (tp1, e1) = sorted(g.offsets.items())
    now = (T0 // BUCKET_MS) * BUCKET_MS
    ends = {tp0: e0[0], tp1: e1[0]}
    lags: list[tuple[int, int]] = []
    for n in range(6 * 40):  # 40 minutes of rounds 10 s apart
        now += 10_000
        ends[tp0] += 7 if n % 6 == 2 else 1  # a spike every minute on p0
        tracker.apply_round(LogOffsets(now, {tp: PartitionEnds(0, v, v) for tp, v in ends.items()}))
        lags.append((now, ends[tp0] - e0[0]))
    s = history.series("thin")
    assert s is not None
    times = s["times_ms"]
    assert times == sorted(times) and times[-1] == now
    # the horizon: nothing older than 20 minutes
    assert times[0] >= now - 20 * 60_000
    full = [t for t in times if t >= now - FULL_RESOLUTION_MS]
    thinned = [t for t in times if t < now - FULL_RESOLUTION_MS]
    # every round of the newest ten minutes; one point a minute before
    assert len(full) >= 59 and all(b - a == 10_000 for a, b in itertools.pairwise(full))
    assert thinned and len({t // BUCKET_MS for t in thinned}) == len(thinned)
    # a thinned point holds its minute's largest lag (the spike is not lost)
    p0 = next(p for p in s["partitions"] if (p["topic"], p["partition"]) == tp0)
    by_time = dict(zip(times, p0["lag"], strict=True))
    for t in thinned:
        minute = [v for tt, v in lags if tt // BUCKET_MS == t // BUCKET_MS]
        assert by_time[t] == max(minute)


def test_thin_keeps_each_columns_peak() -> None:
    # one partition; columns: group lag, group since, lag, since
    times = np.array([10_000, 20_000, 30_000], dtype=np.int64)
    rows = np.array(
        [[5, 9_000, 5, CAUGHT_UP], [UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN], [3, 25_000, 3, 25_000]],
        dtype=np.int64,
    )
    out = thin(times, rows, 1).tolist()
    # largest lag 5; largest lag in seconds: the group's 30 - 25 = 5 s at the last time (1 s at the
    # first), the partition's 5 s too (0 s at the first): expressed at the last time
    assert out == [5, 30_000 - 5_000, 5, 30_000 - 5_000]
    only_caught_up = thin(times[:1], np.array([[0, CAUGHT_UP, 0, CAUGHT_UP]], dtype=np.int64), 1).tolist()
    assert only_caught_up == [0, CAUGHT_UP, 0, CAUGHT_UP]
    unknown = thin(times[:1], np.array([[UNKNOWN] * 4], dtype=np.int64), 1).tolist()
    assert unknown == [UNKNOWN] * 4


def test_idle_minutes_share_their_packed_bytes_and_horizon_zero_keeps_only_the_newest() -> None:
    """Three groups 10 messages behind on quiet topics (computed at each round: the same values, so
    the same row object), two at their ends (not computed at all)."""
    tracker = LagTracker()
    history = LagHistory(tracker, minutes=60)
    off = LagHistory(tracker, minutes=0)
    behind = [stable_classic(f"idle-{i}", 4) for i in range(3)]
    caught_up = [stable_classic(f"done-{i}", 4) for i in range(2)]
    tracker.apply_groups([(g.group_id, g) for g in (*behind, *caught_up)])
    parts = {tp: PartitionEnds(0, e[0] + 10, e[0] + 10) for g in behind for tp, e in g.offsets.items()}
    parts.update({tp: PartitionEnds(0, e[0], e[0]) for g in caught_up for tp, e in g.offsets.items()})
    now = (T0 // BUCKET_MS) * BUCKET_MS
    for _ in range(6 * 30):
        now += 10_000
        tracker.apply_round(LogOffsets(now, parts))
    assert history.last_computed == len(behind)  # the caught-up groups' rows reused
    sizes = history.stored_bytes()
    for _ in range(6 * 10):
        now += 10_000
        tracker.apply_round(LogOffsets(now, parts))
    # ten more idle minutes cost their times (8 bytes a round), not new packed rows
    assert history.stored_bytes() - sizes <= 5 * 6 * 10 * 8 + 5 * 200
    s = history.series("idle-0")
    assert s is not None and set(s["lag"]) == {40}
    # lag in seconds keeps growing with the clock although the row is the same
    assert s["lag_seconds"][-1] > s["lag_seconds"][-2] > 0
    done = history.series("done-0")
    assert done is not None and set(done["lag"]) == {0} and set(done["lag_seconds"]) == {0.0}
    nothing_kept = off.series("idle-0")
    assert nothing_kept is not None and nothing_kept["times_ms"] == [] and nothing_kept["partitions"] == []
    assert off.latest("idle-0") == history.latest("idle-0") == (40, s["lag_seconds"][-1])


@pytest.mark.parametrize("seed", range(20))
def test_pack_round_trips_any_rows(seed: int) -> None:
    rnd = random.Random(seed)
    n = rnd.randrange(0, 6)
    width = 2 + 2 * n
    base = T0 + rnd.randrange(-(10**9), 10**9)
    rows = np.empty((rnd.randrange(1, 20), width), dtype=np.int64)
    since_cols = [1, *range(2 + n, 2 + 2 * n)]
    for r in range(rows.shape[0]):
        for c in range(width):
            if c in since_cols:
                rows[r, c] = rnd.choice((UNKNOWN, CAUGHT_UP, T0 + rnd.randrange(-(10**10), 10**7), 0))
            else:
                rows[r, c] = rnd.choice((UNKNOWN, 0, rnd.randrange(0, 10**4), rnd.randrange(0, 2**62)))
    assert (unpack(pack(rows, base), rows.shape[0], width, base) == rows).all()


def test_kept_keys_are_the_trackers_shared_tuples() -> None:
    """Each group's history keeps its partitions' keys for as long as the history lives: they are
    the tracker's `KeyTable` tuples, not a fresh tuple a partition a group (~31 MB at 10k x 50)."""
    tracker = LagTracker()
    history = LagHistory(tracker, minutes=60)
    groups = [stable_classic(f"shared-{i}", 5) for i in range(3)]
    tracker.apply_groups([(g.group_id, g) for g in groups])
    parts = {tp: PartitionEnds(0, e[0] + 5, e[0] + 5) for g in groups for tp, e in g.offsets.items()}
    tracker.apply_round(LogOffsets(T0, parts))
    for g in groups:
        keys = history._series[g.group_id].keys
        assert sorted(keys) == sorted(g.offsets)
        assert all(k is tracker.keys.key((k[0], k[1])) for k in keys)
