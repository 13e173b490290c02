"""Burrow's evaluator: the window of commits (`streaming.health.window`), the ring of sampled log
ends and the rules (`streaming.health.rules`) over the lag tracker, evaluated after each offsets
round for the groups whose status can have changed.  What a change of status *means* (events,
HTTP JSON) is the serving side's (`streaming.serving.burrow`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from streaming.health.lag import LagTracker
from streaming.health.rules import GroupStatus, evaluate, rule3_at
from streaming.health.window import CommitHistory, SampledEnds

#: groups evaluated between two calls of `Evaluator.evaluate_changed`'s ``pause``
PACE_GROUPS: Final = 250


class Evaluator:
    """The window, the ring and the rules together (Burrow's storage + evaluator)."""

    def __init__(
        self, tracker: LagTracker, cluster: str, intervals: int = 10, min_distance_s: float = 1.0
    ) -> None:
        self.tracker = tracker
        self.cluster = cluster
        self.intervals = intervals
        #: Burrow's broker-offset ring, fed by every round the tracker applies
        self.ends = SampledEnds(intervals, tracker.end_of)
        tracker.listeners.append(self.ends.add_round)
        self.history = CommitHistory(self.ends, intervals, min_distance_s)
        #: group -> re-evaluate once the time passes this (Rule 3 turns true), for the groups whose
        #: inputs did not change
        self._recheck: dict[str, int] = {}
        self._last_now: int | None = None
        self.last_evaluated = 0  # groups evaluated by the last `evaluate_changed`

    def status(self, group_id: str, now_ms: int, *, live: bool = False) -> GroupStatus | None:
        """The group's status now: over a copy of its window (the HTTP routes), or ``live`` over
        the window itself (the offsets thread, which also records into it)."""
        window = self.history.live(group_id) if live else self.history.window(group_id)
        view = self.tracker.view(group_id)
        if window is None or view is None:
            return None
        return evaluate(
            group_id, view, window, self.tracker, self.ends, intervals=self.intervals, now_ms=now_ms
        )

    def statuses(self, now_ms: int) -> list[GroupStatus]:
        out = []
        for gid in self.history.groups():
            gs = self.status(gid, now_ms)
            if gs is not None:
                out.append(gs)
        return out

    def evaluate_changed(
        self, now_ms: int, *, full: bool = False, pause: Callable[[float], object] | None = None
    ) -> tuple[list[GroupStatus], list[str] | None]:
        """One evaluation after an offsets round: the statuses of the groups evaluated, and the
        groups found gone (None: the statuses are every group, the others are gone).

        Only the groups whose status can have changed are evaluated (``full``: every group; the
        results are the same, tests/test_streaming/test_health/test_evaluator.py).  A partition's
        status (`partition_status`) reads its window of commits, the current lag, the recent
        sampled ends and the time (Rule 3); so a group is evaluated again when

        * it was recorded (its window, committed offsets or owners may differ), or deleted;
        * one of its window's partitions changed end offset (current lag), or left the round;
        * the lowest end in a partition's ring moved past its newest commit there (Rule 3's
          "caught up recently" flipped: also when an old end drops out of the ring);
        * the time passed the moment Rule 3 turns true for one of its partitions with lag that is
          not STOP yet: newest commit + (newest - oldest commit time), in whole seconds;
        * topic names changed, the clock went back, or it is the first evaluation: every group.

        ``pause``: called after every `PACE_GROUPS` groups with the thread CPU seconds they took
        (the driver sleeps there, so that a round over many changed groups does not take a whole
        core from the micro-batches in one go)."""
        changed, everything = self.tracker.take_changes()
        moved = self.ends.take_changed()
        changed.update(tp for tp, flip in moved.items() if flip is None)
        flips = {tp: flip for tp, flip in moved.items() if flip is not None and tp not in changed}
        dirty = self.history.take_dirty()
        last, self._last_now = self._last_now, now_ms
        if full or everything or last is None or now_ms < last:
            todo = self.history.groups()
            removed: list[str] | None = None
        else:
            due = {gid for gid, at in self._recheck.items() if now_ms > at}
            todo = sorted(dirty | due | self.history.touching(changed) | self.history.newest_between(flips))
            removed = []
        statuses: list[GroupStatus] = []
        busy_from = time.thread_time()
        for i, gid in enumerate(todo):
            if pause is not None and i and i % PACE_GROUPS == 0:
                pause(time.thread_time() - busy_from)
                busy_from = time.thread_time()
            gs = self.status(gid, now_ms, live=True)
            if gs is None:
                self._recheck.pop(gid, None)
                if removed is not None:
                    removed.append(gid)
                continue
            statuses.append(gs)
            self._recheck[gid] = rule3_at(gs, now_ms)
        if removed is None:
            live = {gs.group for gs in statuses}
            self._recheck = {gid: at for gid, at in self._recheck.items() if gid in live}
        self.last_evaluated = len(todo)
        return statuses, removed
