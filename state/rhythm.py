"""Commit rhythm from the log: how often a group commits -- in the log's own time, so a mirror
catching up with a backlog or restarted from its checkpoint measures the same rate as a live one --
and which of its partitions trail its newest commit.

* The commit rate: one point per `BUCKET_MS` of record time in which the group committed --
  ``(time of its last commit record, the group's commits counter after it)`` (`note_commits`, per
  commit row) -- at most `WINDOW_POINTS`: about a minute of a busy group.  A function of the
  records alone, so any split of the log into micro-batches gives the same window (the fold's
  batch-invariance property).  `commit_rate` at ``now``: commits after the window's first point
  over the time from it to ``now``, so a group that stopped committing decays towards 0 instead of
  keeping its last rate.  Collapsed commits count as the commits they stand for (``n_commits``), at
  the time of the row kept -- the last of its run, and runs never cross a bucket's edge
  (`streaming.pipeline.prepare`), so the window is exactly the uncollapsed log's.
* Partitions behind the rhythm (`commit_lags`): per committed partition (abandoned ones left out,
  `state.abandoned`), how far its last commit trails the group's newest commit.  A consumer that
  commits only some partitions -- or stopped on one -- shows here before its lag does; a partition
  without new records that a client does not commit again (librdkafka skips unchanged offsets)
  trails too: read it with the partition's lag.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Final

from state.model import O_COMMIT_TS, Group, TopicPartition

WINDOW_POINTS: Final = 12
BUCKET_MS: Final = 5_000


#: the window: ``(t_ms, commits)`` points, oldest first, packed little-endian int64 pairs in one
#: immutable `bytes` (each update makes a new one).  Not a list of tuples nor an array: those are
#: objects the cyclic garbage collector tracks -- one more per group made the collector run more
#: often while a micro-batch builds every group it touches (bench/fold.py lost 10-20% to it);
#: bytes are not tracked, and b"" is a shared constant.
Window = bytes
_POINT: Final = struct.Struct("<qq")
EMPTY: Final = b""


def points(window: bytes) -> list[tuple[int, int]]:
    """The window as ``(t_ms, commits)`` pairs, oldest first."""
    return list(_POINT.iter_unpack(window))


def from_points(pairs: Iterable[tuple[int, int]]) -> bytes:
    return b"".join(_POINT.pack(t, c) for t, c in pairs)


def note_commits(window: bytes, t_ms: int, commits: int) -> bytes:
    """The window after a commit row at record time ``t_ms``; ``commits``: the group's counter after it."""
    if window:
        last_t, last_c = _POINT.unpack_from(window, len(window) - _POINT.size)
        if t_ms < last_t or commits < last_c:
            return window  # an older record time (or a counter reset): the window stays monotonic
        if t_ms // BUCKET_MS == last_t // BUCKET_MS:
            return window[: -_POINT.size] + _POINT.pack(t_ms, commits)
    out = window + _POINT.pack(t_ms, commits)
    return out[_POINT.size :] if len(out) > _POINT.size * WINDOW_POINTS else out


def note_run(window: bytes, times: list[int], counts: list[int] | None, total: int) -> bytes:
    """`note_commits` for a run of commit rows applied at once (the fold's bulk path): ``times`` their
    record times, ``counts`` the commits each stands for (None: one each), ``total`` the counter
    after the run.  Only the last row of each bucket matters; a run within one bucket is O(1)."""
    n = len(times)
    if n == 0:
        return window
    if times[0] // BUCKET_MS == times[-1] // BUCKET_MS:
        return note_commits(window, times[-1], total)
    running = total - (n if counts is None else sum(1 if c is None else c for c in counts))
    for i, t in enumerate(times):
        running += 1 if counts is None or counts[i] is None else counts[i]
        if i + 1 == n or times[i + 1] // BUCKET_MS != t // BUCKET_MS:
            window = note_commits(window, t, running)
    return window


def commit_rate(pairs: Sequence[tuple[int, int]], now_ms: int) -> float | None:
    """Commits per second from the first point to ``now_ms`` (None: fewer than two points)."""
    if len(pairs) < 2:
        return None
    t0, c0 = pairs[0]
    span = max(now_ms, pairs[-1][0]) - t0
    if span <= 0:
        return None
    return (pairs[-1][1] - c0) * 1000 / span


def commit_lags(g: Group, exclude: Iterable[TopicPartition] = ()) -> dict[TopicPartition, int]:
    """Per committed partition (not in ``exclude``): ms its last commit trails the group's newest."""
    skip = set(exclude)
    times = {tp: e[O_COMMIT_TS] for tp, e in g.offsets.items() if tp not in skip}
    if not times:
        return {}
    newest = max(times.values())
    return {tp: newest - t for tp, t in times.items()}


def partitions_behind(g: Group, behind_ms: int, exclude: Iterable[TopicPartition] = ()) -> int:
    """Committed partitions whose last commit trails the group's newest by more than ``behind_ms``."""
    return sum(1 for lag in commit_lags(g, exclude).values() if lag > behind_ms)


def oldest_commit_ms(g: Group, exclude: Iterable[TopicPartition] = ()) -> int | None:
    """The oldest last-commit time over the group's partitions (not in ``exclude``)."""
    skip = set(exclude)
    return min((e[O_COMMIT_TS] for tp, e in g.offsets.items() if tp not in skip), default=None)
