"""Burrow's side fed by hand, as the mirror feeds it: a lag tracker with its `Burrow`, a round of log
ends, a simple group's commit applied as the sink applies it (the window, ring and evaluator tests)."""

from __future__ import annotations

from lab.records import Log
from state.replay import fold
from streaming.health.lag import LagTracker, LogOffsets, PartitionEnds
from streaming.serving.burrow import Burrow


def tracked_burrow(intervals: int = 10) -> tuple[LagTracker, Burrow]:
    tracker = LagTracker()
    return tracker, Burrow(tracker, "c", intervals, 0)


def end_round(tracker: LagTracker, at_ms: int, ends: dict[tuple[str, int], int], took_ms: int = 100) -> None:
    """One round of log offsets read at ``at_ms`` (each partition's end also its stable offset)."""
    parts = {tp: PartitionEnds(0, e, e) for tp, e in ends.items()}
    tracker.apply_round(LogOffsets(at_ms, parts, round_seconds=took_ms / 1000))


def commit(tracker: LagTracker, burrow: Burrow, offset: int, ts: int, observed: int | None = None) -> None:
    """Group "g" (a simple group: offsets only) commits ``offset`` on t-0 at ``ts``, as the sink
    applies it."""
    log = Log()
    log.commit("g", "t", 0, offset, commit_ts=ts)
    g = fold(None, log.records, group_id="g").group
    assert g is not None and g.offsets[("t", 0)][3] == ts
    burrow.history.record(tracker.apply_groups([("g", g)]), tracker, observed)
