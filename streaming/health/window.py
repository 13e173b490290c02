"""Burrow's storage: per group and partition a sliding window of commits (`CommitHistory`), and
the ring of sampled log ends (`SampledEnds`) a commit's lag and Rule 3's "caught up recently" are
read against.  The evaluator (`streaming.health.rules`, `streaming.health.evaluator`) reads both;
nothing here knows of statuses, events or HTTP.

The window (`CommitHistory`) keeps the last ``intervals`` commits per partition (Burrow's storage
setting of that name, default 10); a commit less than ``min_distance_s`` after the previous one
replaces it and keeps its time (Burrow's ``min-distance``).  The ring (`SampledEnds`) keeps the
last ``intervals`` log ends sampled per partition, one per offsets round, unflattened -- Burrow's
broker-offset ring, which its "was the consumer caught up recently?" check reads.
"""

from __future__ import annotations

import threading
import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

from streaming.health.lag import GroupOffsets, LagTracker, LogOffsets

#: (offset, commit timestamp ms, lag at commit or None, observed ms): one commit as the HTTP
#: routes show it (Burrow's ``ConsumerOffset``: offset, timestamp, lag, observedAt)
Commit = tuple[int, int, int | None, int]
#: a partition's window of commits as `CommitHistory` keeps it: flat ``(offset, timestamp_ms,
#: lag or -1, observed_ms)`` quadruples, oldest first.  The rules read it as it is stored:
#: evaluating every changed group after each offsets round is the driver's largest lag cost
#: (docs/monitoring.md), and building a tuple per commit first cost as much as the rules themselves.
Window = Sequence[int]
#: a partition's window as time to catch up reads it (`CommitHistory.spans`): ``(commits, (oldest
#: time, offset), (newest time, offset), the newest commit's lag at commit or -1, when the mirror
#: observed the newest commit)``
Span = tuple[int, tuple[int, int], tuple[int, int], int, int]
#: the fields of one commit in a `Window`
STRIDE: Final = 4
OFFSET, TIMESTAMP, LAG, OBSERVED = 0, 1, 2, 3


def window_of(commits: Iterable[tuple[int, int, int | None] | Commit]) -> list[int]:
    """Commits -> the flat window (lag None -> -1; observed defaults to the commit's time)."""
    out: list[int] = []
    for c in commits:
        lag = c[2]
        out.extend((c[0], c[1], -1 if lag is None else lag, c[3] if len(c) > 3 else c[1]))
    return out


def commits_of(w: Window) -> list[Commit]:
    """The flat window -> commits (lag -1 -> None), oldest first."""
    return [(w[i], w[i + 1], None if w[i + 2] < 0 else w[i + 2], w[i + 3]) for i in range(0, len(w), STRIDE)]


# ------------------------------------------------------------------------ the ring of log ends
class SampledEnds:
    """Burrow's broker-offset ring: per partition the last ``intervals`` log ends the offsets
    rounds read, each with the time its round had finished reading (``(end, read_ms)`` pairs in
    one ``array('q')``, oldest first).  Unlike kafka-lag-exporter's lookup table it keeps every
    sample, flat runs included: "caught up recently" must forget an old end after ``intervals``
    rounds even on a quiet topic.

    Fed by every round the lag tracker applies (`LagTracker.listeners`); a partition that leaves
    the round (no group uses it, or its topic is gone) leaves the ring, as Burrow drops a deleted
    topic's offsets."""

    def __init__(self, intervals: int, end_of: Callable[[Any], int]) -> None:
        self.size = max(1, intervals)
        self.end_of = end_of
        self.rings: dict[tuple[str, int], array[int]] = {}
        #: since `take_changed`: partition -> the committed offsets ``[lo, hi)`` for which "caught
        #: up recently" (``min(ring) <= newest commit``) flipped, or None: anything may differ (the
        #: partition appeared or left)
        self._changed: dict[tuple[str, int], tuple[int, int] | None] = {}

    def add_round(self, r: LogOffsets) -> None:
        read_ms = r.sampled_at_ms + int(r.round_seconds * 1000)
        rings, changed, end_of, width = self.rings, self._changed, self.end_of, 2 * self.size
        for tp, ends in r.partitions.items():
            end = end_of(ends)
            a = rings.get(tp)
            if a is None:
                rings[tp] = array("q", (end, read_ms))
                changed[tp] = None
                continue
            before = min(a[0::2])
            full = len(a) >= width
            if full:
                del a[:2]
            a.append(end)
            a.append(read_ms)
            after = min(a[0::2]) if full else min(before, end)
            if after != before:
                lo, hi = (after, before) if after < before else (before, after)
                if tp not in changed:
                    changed[tp] = (lo, hi)
                elif (was := changed[tp]) is not None:
                    changed[tp] = (min(was[0], lo), max(was[1], hi))
        if len(rings) > len(r.partitions):
            for tp in [tp for tp in rings if tp not in r.partitions]:
                del rings[tp]
                changed[tp] = None

    def recent(self, tp: tuple[str, int]) -> Sequence[int]:
        """The partition's last ``intervals`` sampled ends, oldest first."""
        a = self.rings.get(tp)
        return a[0::2] if a is not None else ()

    def end_before(self, tp: tuple[str, int], at_ms: int) -> int | None:
        """The end of the newest sample read at or before ``at_ms`` -- what Burrow's storage holds
        when a commit of that time arrives; a commit older than the ring gets its oldest sample
        (the closest read after it); None without samples."""
        a = self.rings.get(tp)
        if not a:
            return None
        for i in range(len(a) - 2, -1, -2):
            if a[i + 1] <= at_ms:
                return a[i]
        return a[0]

    def take_changed(self) -> dict[tuple[str, int], tuple[int, int] | None]:
        out, self._changed = self._changed, {}
        return out


# ------------------------------------------------------------------------------ the window
class GroupWindows:
    """One group's windows packed: its partitions' keys (the tracker's shared tuples), each one's
    number of commits, and every window back to back in one ``array('q')``.  A dictionary of one
    ``array('q')`` a partition was ~7 KB a group of 50 partitions holding one commit each (~75 MB
    of the driver at 10k groups x 50, `bench/lag.py`); this is ~2.4 KB.  A change rebuilds the
    group's arrays (`CommitHistory.record`); readers get copies (`items`)."""

    __slots__ = ("data", "keys", "lens")

    def __init__(self, windows: Mapping[tuple[str, int], Sequence[int]]) -> None:
        self.keys: tuple[tuple[str, int], ...] = tuple(windows)
        self.lens = array("I", (len(a) // STRIDE for a in windows.values()))
        self.data = array("q")
        for a in windows.values():
            self.data.extend(a)

    def items(self) -> Iterator[tuple[tuple[str, int], array[int]]]:
        """(key, a copy of its window), in the order recorded."""
        data, at = self.data, 0
        for tp, n in zip(self.keys, self.lens, strict=True):
            end = at + n * STRIDE
            yield tp, data[at:end]
            at = end

    def newest(self) -> Iterator[tuple[tuple[str, int], int]]:
        """(key, the offset of its newest commit) of every non-empty window, without copies."""
        data, at = self.data, 0
        for tp, n in zip(self.keys, self.lens, strict=True):
            at += n * STRIDE
            if n:
                yield tp, data[at - STRIDE + OFFSET]

    def spans(self) -> dict[tuple[str, int], Span]:
        data, at, out = self.data, 0, {}
        for tp, n in zip(self.keys, self.lens, strict=True):
            first, at = at, at + n * STRIDE
            if n:
                last = at - STRIDE
                out[tp] = (
                    n,
                    (data[first + TIMESTAMP], data[first + OFFSET]),
                    (data[last + TIMESTAMP], data[last + OFFSET]),
                    data[last + LAG],
                    data[last + OBSERVED],
                )
        return out

    def commits(self) -> int:
        return sum(self.lens)


class CommitHistory:
    """Per group and partition, the last ``intervals`` commits, flat (offset, timestamp, lag or
    -1, observed): 32 bytes a commit, packed a group at a time (`GroupWindows`)."""

    def __init__(self, ends: SampledEnds, intervals: int = 10, min_distance_s: float = 1.0) -> None:
        self.intervals = intervals
        self.min_distance_ms = int(min_distance_s * 1000)
        #: the ring a commit's lag is computed against
        self.ends = ends
        self._lock = threading.Lock()
        self._groups: dict[str, GroupWindows] = {}
        #: groups recorded (changed or deleted) since `take_dirty`
        self._dirty: set[str] = set()

    def record(
        self,
        changed: Iterable[tuple[str, GroupOffsets | None]],
        tracker: LagTracker,
        now_ms: int | None = None,
    ) -> None:
        """The groups the sink applied: a commit newer than the window's newest is appended, with
        its lag against the log end read before it (the ring `SampledEnds`) -- unknown (-1) until
        the first round -- and the time it was observed (``now_ms``, default the clock: Burrow's
        ``observedAt``)."""
        observed = int(time.time() * 1000) if now_ms is None else now_ms
        end_before = self.ends.end_before
        key = tracker.keys.key
        width = STRIDE * self.intervals
        with self._lock:
            for gid, view in changed:
                self._dirty.add(gid)
                if view is None:
                    self._groups.pop(gid, None)
                    continue
                packed = self._groups.get(gid)
                old = dict(packed.items()) if packed is not None else {}
                new: dict[tuple[str, int], array[int]] = {}
                for (t, p), (offset, ts) in view.offsets.items():
                    tp = key((tracker.name_of(t), p))
                    a = old.get(tp)
                    if a is None:
                        a = array("q")
                    elif a[-STRIDE + OFFSET] == offset and a[-STRIDE + TIMESTAMP] == ts:
                        new[tp] = a
                        continue
                    end = end_before(tp, ts)
                    lag = -1 if end is None else max(0, end - offset)
                    if len(a) and 0 <= ts - a[-STRIDE + TIMESTAMP] < self.min_distance_ms:
                        # Burrow's min-distance: replace the newest, keep its time
                        a[-STRIDE + OFFSET], a[-STRIDE + LAG], a[-STRIDE + OBSERVED] = offset, lag, observed
                    else:
                        a.extend((offset, ts, lag, observed))
                        if len(a) > width:
                            del a[:STRIDE]
                    new[tp] = a
                self._groups[gid] = GroupWindows(new)

    def window(self, group_id: str) -> dict[tuple[str, int], list[int]] | None:
        """A copy of the group's windows (for the HTTP routes' threads)."""
        with self._lock:
            g = self._groups.get(group_id)
        return None if g is None else {tp: a.tolist() for tp, a in g.items()}

    def live(self, group_id: str) -> dict[tuple[str, int], array[int]] | None:
        """The group's windows for the offsets thread's evaluation (copies: the packed arrays are
        rebuilt, never changed in place, so no lock is held while the rules read them)."""
        with self._lock:
            g = self._groups.get(group_id)
        return None if g is None else dict(g.items())

    def spans(self, group_id: str) -> dict[tuple[str, int], Span]:
        """Per partition of the group's window its `Span`: what `streaming.health.catch_up` reads,
        without copying the window (a scrape reads every group's)."""
        with self._lock:
            g = self._groups.get(group_id)
        return {} if g is None else g.spans()

    def groups(self) -> list[str]:
        with self._lock:
            return sorted(self._groups)

    def take_dirty(self) -> set[str]:
        """The groups recorded since the previous call (their window or owners may differ)."""
        with self._lock:
            out, self._dirty = self._dirty, set()
        return out

    def touching(self, partitions: set[tuple[str, int]]) -> set[str]:
        """The groups whose window holds one of ``partitions``."""
        if not partitions:
            return set()
        with self._lock:
            return {gid for gid, g in self._groups.items() if not partitions.isdisjoint(g.keys)}

    def newest_between(self, ranges: Mapping[tuple[str, int], tuple[int, int]]) -> set[str]:
        """The groups whose newest commit on one of the partitions of ``ranges`` lies in its
        ``[lo, hi)``: those whose "caught up recently" flipped when the ring of ends moved."""
        if not ranges:
            return set()
        out = set()
        with self._lock:
            groups = list(self._groups.items())
        for gid, g in groups:
            if ranges.keys().isdisjoint(g.keys):
                continue
            for tp, newest in g.newest():
                r = ranges.get(tp)
                if r is not None and r[0] <= newest < r[1]:
                    out.add(gid)
                    break
        return out

    def memory_entries(self) -> int:
        with self._lock:
            return sum(g.commits() for g in self._groups.values())
