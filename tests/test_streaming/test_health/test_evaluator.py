"""Burrow's incremental evaluation (`Burrow.evaluate_all`: only the groups whose status can have
changed) gives what a full evaluation gives, round after round, over groups that keep up, fall
behind, stop, stall, rewind, are deleted and come back, and partitions whose end moves, stays
flat or leaves the round (a deleted topic) -- property-style, seeded.  The incremental side is
paced as the driver paces it (``pause`` between slices of groups), which changes nothing either."""

from __future__ import annotations

import random
from typing import Any

import pytest

from lab.records import Log
from lab.synthetic import stable_classic
from state.model import Group
from state.replay import fold
from streaming.health import evaluator as burrow_module
from streaming.health import rules as b
from streaming.health.lag import LagTracker, LogOffsets, PartitionEnds
from streaming.serving.burrow import Burrow
from tests.support.burrow import end_round, tracked_burrow

BEHAVIOURS = ("keeps_up", "slow", "stopped", "stalled", "rewinds", "idle_topic")


class Pipeline:
    def __init__(self, intervals: int, paced: bool = False) -> None:
        self.tracker = LagTracker()
        self.burrow = Burrow(self.tracker, "c", intervals, 0)
        #: thread CPU seconds handed to ``pause``, one entry per pause (paced pipelines only)
        self.pauses: list[float] | None = [] if paced else None

    def groups(self, changed: list[tuple[str, Group | None]]) -> None:
        self.burrow.history.record(self.tracker.apply_groups(changed), self.tracker)

    def round(self, r: LogOffsets, now_ms: int, full: bool) -> list[dict[str, Any]]:
        self.tracker.apply_round(r)
        pause = None if self.pauses is None else self.pauses.append
        return self.burrow.evaluate_all(now_ms, full=full, pause=pause)


@pytest.mark.parametrize("seed", range(8))
def test_incremental_evaluation_equals_full_evaluation(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(burrow_module, "PACE_GROUPS", 3)
    rnd = random.Random(seed)
    intervals = rnd.choice((3, 5, 10))
    groups: dict[str, Group] = {}
    behaviour: dict[tuple[str, tuple[str, int]], str] = {}
    for i in range(12):
        g = stable_classic(f"g{seed}-{i}", rnd.choice((2, 4, 6)), topics=2)
        groups[g.group_id] = g
        for tp in g.offsets:
            behaviour[(g.group_id, tp)] = rnd.choice(BEHAVIOURS)
    ends = {tp: e[0] + rnd.randrange(0, 50) for g in groups.values() for tp, e in g.offsets.items()}
    inc, full = Pipeline(intervals, paced=True), Pipeline(intervals)
    for p in (inc, full):
        p.groups(list(groups.items()))
    now = 1_700_000_000_000
    deleted: set[str] = set()
    gone_topic: str | None = None
    evaluated = 0
    for n in range(120):
        now += rnd.choice((500, 1000, 1000, 2000, 5000, 15_000))
        # ends: busy partitions grow, idle ones stay; a topic leaves the round for a while
        for tp in ends:
            if (
                not any(b == "idle_topic" for (_, t), b in behaviour.items() if t == tp)
                and rnd.random() < 0.6
            ):
                ends[tp] += rnd.randrange(1, 30)
        if n % 40 == 10:
            gone_topic = rnd.choice(sorted({t for t, _ in ends}))
        elif n % 40 == 20:
            gone_topic = None
        # commits
        changed: list[tuple[str, Group | None]] = []
        for gid, g in groups.items():
            if gid in deleted:
                continue
            moved = False
            for tp, e in list(g.offsets.items()):
                b = behaviour[(gid, tp)]
                if b == "stopped" or rnd.random() < 0.3:
                    continue
                off = e[0]
                if b in ("keeps_up", "idle_topic"):
                    off = ends[tp]
                elif b == "slow":
                    off = min(ends[tp], off + rnd.randrange(0, 10))
                elif b == "rewinds" and rnd.random() < 0.2:
                    off = max(0, off - rnd.randrange(1, 40))
                elif b == "rewinds":
                    off = min(ends[tp], off + 5)
                g.offsets[tp] = (off, e[1], e[2], now - rnd.randrange(0, 400), *e[4:])
                moved = True
            if moved:
                changed.append((gid, g.copy()))
        if n % 30 == 15:  # a group deleted, another one back
            victim = rnd.choice(sorted(set(groups) - deleted))
            deleted.add(victim)
            changed.append((victim, None))
        if n % 30 == 25 and deleted:
            back = sorted(deleted)[0]
            deleted.discard(back)
            changed.append((back, groups[back].copy()))
        for p in (inc, full):
            p.groups(changed)
        parts = {tp: PartitionEnds(0, end, end) for tp, end in ends.items() if tp[0] != gone_topic}
        r = LogOffsets(now, parts, missing_topics=frozenset({gone_topic} if gone_topic else ()))
        got = inc.round(r, now, full=False)
        want = full.round(r, now, full=True)
        assert got == want, f"round {n}"
        assert inc.burrow.watcher.groups == full.burrow.watcher.groups, f"round {n}"
        assert inc.burrow.watcher.partitions == full.burrow.watcher.partitions, f"round {n}"
        for gid in full.burrow.history.groups():
            assert _partitions(full, gid, now) == _lag_rows_oracle(full, gid), f"round {n}, {gid}"
        evaluated += inc.burrow.last_evaluated
    # every status was reached somewhere, and the incremental side skipped work
    assert {s for ps in full.burrow.watcher.partitions.values() for s in ps.values()} | {
        e["type"] for e in full.burrow.watcher.events
    } >= {"group_status_changed"}
    assert evaluated < 120 * len(groups)
    # paced every 3 groups whenever a round evaluated more than 3
    assert inc.pauses and all(busy >= 0 for busy in inc.pauses)


def _partitions(p: Pipeline, gid: str, now: int) -> list[tuple[str, int, int]]:
    gs = p.burrow.status(gid, now)
    assert gs is not None
    return [(x.topic, x.partition, x.current_lag) for x in gs.partitions]


def _lag_rows_oracle(p: Pipeline, gid: str) -> list[tuple[str, int, int]]:
    """What the evaluation must see, from the lag API's rows (``GET /groups/{id}/lag``): every
    partition with a committed offset or a window, current lag NaN -> 0 (Burrow's)."""
    rows = p.tracker.group_lag(gid)
    window = p.burrow.history.window(gid)
    assert rows is not None and window is not None
    return [
        (r.topic, r.partition, 0 if r.lag != r.lag else int(r.lag))
        for r in rows
        if r.committed is not None or window.get((r.topic, r.partition))
    ]


def test_only_the_groups_whose_verdict_can_flip_are_evaluated_when_the_ring_moves() -> None:
    """A partition's ring moving past old ends re-evaluates the groups whose newest commit there
    lies where "caught up recently" flipped -- not every group on the partition."""
    tracker, burrow = tracked_burrow(intervals=3)
    tp = ("t", 0)
    end_round(tracker, 0, {tp: 100})
    for gid, offset in (("behind", 120), ("caught-up", 200)):
        log = Log()
        log.commit(gid, "t", 0, offset, commit_ts=500)
        g = fold(None, log.records, group_id=gid).group
        assert g is not None
        burrow.history.record(tracker.apply_groups([(gid, g)]), tracker)
    burrow.evaluate_all(1000)
    for k in range(2):  # the end moves once, then stays: the ring is [100, 200, 200]
        end_round(tracker, 2000 + 1000 * k, {tp: 200})
        burrow.evaluate_all(2000 + 1000 * k)
    assert burrow.watcher.partitions["behind"][("t", 0)] == b.OK  # stopped, but caught up recently
    # the statuses' keys are the tracker's shared tuples, not one fresh tuple a partition a group
    assert all(k is tracker.keys.key(("t", 0)) for ps in burrow.watcher.partitions.values() for k in ps)
    # the round where the 100 drops out: min 100 -> 200 flips commits in [100, 200)
    end_round(tracker, 4000, {tp: 200})
    burrow.evaluate_all(4000)
    assert burrow.last_evaluated == 1  # "behind" (120), not "caught-up" (200)
    assert burrow.watcher.partitions["behind"][("t", 0)] == b.STOP
