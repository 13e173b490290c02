"""Burrow-compatible consumer health: a sliding window of commits per partition, a ring of
sampled log ends, Burrow's evaluation rules, its HTTP paths and JSON shapes.

The rules are linkedin/Burrow 1.9.5's (``core/internal/evaluator/caching.go``,
``calculatePartitionStatus`` and Rules 1-5), as small pure functions over a partition's window of
commits, each ``(offset, timestamp_ms, lag | -1, observed_ms)`` -- the lag being the messages
behind the log end read *before* the commit (Burrow's storage computes it against the newest
broker offset it holds when the commit arrives).  The window (`CommitHistory`) keeps the last
``intervals`` commits per partition (Burrow's storage setting of that name, default 10); a commit
less than ``min_distance_s`` after the previous one replaces it and keeps its time (Burrow's
``min-distance``).  The ring (`SampledEnds`) keeps the last ``intervals`` log ends sampled per
partition, one per offsets round, unflattened -- Burrow's broker-offset ring, which its "was the
consumer caught up recently?" check reads.

Where the mirror differs from Burrow (docs/monitoring.md "Consumer health"):

* commits reach the window once per offsets round (the newest commit of each partition since the
  previous round, as the fold leaves it): Burrow with a min-distance of ``lag_interval_s`` (and
  of the trigger interval); a consumer committing less often than that is seen commit by commit;
* a group deleted in the log (tombstone, DeleteGroups, all offsets expired) and an offset deleted
  or expired leave the window at once -- Burrow keeps them until ``expire-group``;
* owners (``owner``, ``client_id``) come from the group's assignment in the log, for every kind of
  group (KIP-848 included), with topic ids resolved to names;
* the log ends are the LSO by default (``lag_isolation``; Burrow reads the high watermark), and
  only of the partitions some mirrored group uses;
* the window starts empty after a mirror restart (``complete`` < 1 until it fills), as Burrow's.
"""

from __future__ import annotations

import socket
import threading
import time
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple
from urllib.parse import unquote

from streaming.serving.lag import NO_OWNER, UNKNOWN, GroupOffsets, LagTracker, LogOffsets, lag_json

# Burrow's StatusConstant (core/protocol/evaluator.go): ordered from good to bad
NOTFOUND: Final = 0
OK: Final = 1
WARN: Final = 2
ERR: Final = 3
STOP: Final = 4
STALL: Final = 5
REWIND: Final = 6
STATUS_NAMES: Final = ("NOTFOUND", "OK", "WARN", "ERR", "STOP", "STALL", "REWIND")

#: (offset, commit timestamp ms, lag at commit or None, observed ms): one commit as the HTTP
#: routes show it (Burrow's ``ConsumerOffset``: offset, timestamp, lag, observedAt)
Commit = tuple[int, int, int | None, int]
#: a partition's window of commits as `CommitHistory` keeps it: flat ``(offset, timestamp_ms,
#: lag or -1, observed_ms)`` quadruples, oldest first.  The rules read it as it is stored:
#: evaluating every changed group after each offsets round is the driver's largest lag cost
#: (docs/monitoring.md), and building a tuple per commit first cost as much as the rules themselves.
Window = Sequence[int]
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


# ------------------------------------------------------------------------------------- rules
# Burrow 1.9.5's rules over a window of commits (``w``, oldest first, never empty).  The lag of a
# commit may be unknown (-1: no log end had been read before it): the rules skip it, as Burrow's
# skip a nil lag.


def rule1_lag_ever_zero(w: Window, allowed_lag: int = 0) -> bool:
    """Rule 1 -- the lag was zero (at most ``allowed_lag``) at some commit of the window: then the
    window is OK as far as Rules 4 and 5 go (Burrow's ``!isLagAlwaysNotZero``)."""
    lags = w[LAG::STRIDE]
    if allowed_lag == 0:
        return 0 in lags  # (the common case, at C speed: the evaluation runs per partition and round)
    return any(0 <= lag <= allowed_lag for lag in lags)


def rule2_rewind_at(w: Window) -> int:
    """Rule 2 -- the index (in commits) of the first commit lower than the one before it, -1 when
    none (Burrow's ``checkIfOffsetsRewind``)."""
    offsets = list(w[OFFSET::STRIDE])
    if offsets == sorted(offsets):
        return -1  # never lower than the one before (the common case, at C speed)
    for i in range(1, len(offsets)):
        if offsets[i] < offsets[i - 1]:
            return i
    return -1  # pragma: no cover - unsorted means some offset is lower than the one before


def rule2_recovered(w: Window, rewind_at: int) -> bool:
    """Rule 2, part 2 -- after the rewind at ``rewind_at`` the consumer committed at or past the
    offset it had before it: recovered, so the rewind is not held against it (Burrow's
    ``checkIfRewindRecovered``, since 1.3.7)."""
    before = w[(rewind_at - 1) * STRIDE]
    return any(off >= before for off in w[rewind_at * STRIDE :: STRIDE])


def rule3_stopped(w: Window, now_ms: int) -> bool:
    """Rule 3 -- the time since the newest commit is longer than the window's span (newest minus
    oldest commit time): the consumer stopped committing (STOP).  ``now`` in whole seconds, as
    Burrow reads it (``time.Now().Unix() * 1000``)."""
    first, last = w[TIMESTAMP], w[-STRIDE + TIMESTAMP]
    return (now_ms // 1000 * 1000 - last) > (last - first)


def rule4_stalled(w: Window) -> bool:
    """Rule 4 -- commits that never change the offset, with lag (Rule 1 ruled zero lag out): STALL."""
    offsets = w[OFFSET::STRIDE]
    return offsets.count(offsets[0]) == len(offsets)


def rule5_lag_not_decreasing(w: Window) -> bool:
    """Rule 5 -- offsets advance but the lag never decreases between known lags: WARN (slow)."""
    last = -1
    for lag in w[LAG::STRIDE]:
        if lag >= 0:
            if lag < last:
                return False
            last = lag
    return True


def recent_lag_zero(w: Window, recent_ends: Sequence[int]) -> bool:
    """Burrow's ``checkIfRecentLagZero``: one of the last ``intervals`` sampled log ends (the ring,
    not a compressed history) was at or below the newest committed offset -- the consumer was
    caught up minutes ago, so not STOP yet."""
    newest = w[-STRIDE + OFFSET]
    return any(end <= newest for end in recent_ends)


def partition_status(
    w: Window, current_lag: int, recent_ends: Sequence[int], now_ms: int, allowed_lag: int = 0
) -> int:
    """Burrow 1.9.5's ``calculatePartitionStatus``, in its order: never an error without current
    lag; STOP (Rule 3) unless recently caught up; REWIND (Rule 2) unless recovered -- checked
    before Rule 1, since a consumer caught up and then reset backwards has zero lag in its window;
    then, only if the lag was never zero (Rule 1), STALL (Rule 4) and WARN (Rule 5); else OK."""
    if not w or current_lag <= allowed_lag:
        return OK
    if rule3_stopped(w, now_ms) and not recent_lag_zero(w, recent_ends):
        return STOP
    at = rule2_rewind_at(w)
    if at > 0 and not rule2_recovered(w, at):
        return REWIND
    if not rule1_lag_ever_zero(w, allowed_lag):
        if rule4_stalled(w):
            return STALL
        if rule5_lag_not_decreasing(w):
            return WARN
    return OK


def rule3_flips_at(w: Window, current_lag: int, status: int, now_ms: int) -> int | None:
    """The time after which Rule 3 (stopped) turns true for a partition with current lag that is
    not STOP yet, its window unchanged: ``now // 1000 * 1000 > 2 * newest - oldest``, i.e. ``now``
    past the returned time (None: already past, or never by time alone)."""
    if current_lag > 0 and w and status != STOP:
        flip = ((2 * w[-STRIDE + TIMESTAMP] - w[TIMESTAMP]) // 1000 + 1) * 1000 - 1
        if flip >= now_ms:
            return flip
    return None


def group_status(partition_statuses: Iterable[int]) -> int:
    """The worst partition status, STOP/STALL/REWIND reported as ERR for the group (Burrow's)."""
    worst = OK
    for s in partition_statuses:
        worst = max(worst, s)
    return ERR if worst > ERR else worst


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
class CommitHistory:
    """Per group and partition, the last ``intervals`` commits, as flat ``array('q')``s
    (offset, timestamp, lag or -1, observed): 32 bytes a commit."""

    def __init__(self, ends: SampledEnds, intervals: int = 10, min_distance_s: float = 1.0) -> None:
        self.intervals = intervals
        self.min_distance_ms = int(min_distance_s * 1000)
        #: the ring a commit's lag is computed against
        self.ends = ends
        self._lock = threading.Lock()
        self._groups: dict[str, dict[tuple[str, int], array[int]]] = {}
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
        width = STRIDE * self.intervals
        with self._lock:
            for gid, view in changed:
                self._dirty.add(gid)
                if view is None:
                    self._groups.pop(gid, None)
                    continue
                old = self._groups.get(gid, {})
                new: dict[tuple[str, int], array[int]] = {}
                for (t, p), (offset, ts) in view.offsets.items():
                    tp = (tracker.name_of(t), p)
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
                self._groups[gid] = new

    def window(self, group_id: str) -> dict[tuple[str, int], list[int]] | None:
        """A copy of the group's windows (for the HTTP routes' threads)."""
        with self._lock:
            g = self._groups.get(group_id)
            return None if g is None else {tp: a.tolist() for tp, a in g.items()}

    def live(self, group_id: str) -> dict[tuple[str, int], array[int]] | None:
        """The group's windows themselves, no copy: only for the thread that also calls `record`
        (the offsets thread evaluates between two of its own `record` calls)."""
        with self._lock:
            return self._groups.get(group_id)

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
            return {gid for gid, g in self._groups.items() if not g.keys().isdisjoint(partitions)}

    def newest_between(self, ranges: Mapping[tuple[str, int], tuple[int, int]]) -> set[str]:
        """The groups whose newest commit on one of the partitions of ``ranges`` lies in its
        ``[lo, hi)``: those whose "caught up recently" flipped when the ring of ends moved."""
        if not ranges:
            return set()
        out = set()
        with self._lock:
            for gid, g in self._groups.items():
                for tp in g.keys() & ranges.keys():
                    lo, hi = ranges[tp]
                    if lo <= g[tp][-STRIDE + OFFSET] < hi:
                        out.add(gid)
                        break
        return out

    def memory_entries(self) -> int:
        with self._lock:
            return sum(len(a) // STRIDE for g in self._groups.values() for a in g.values())


# ------------------------------------------------------------------------------ evaluation
class PartitionStatus(NamedTuple):
    topic: str
    partition: int
    owner: str
    client_id: str
    status: int
    window: Window  # flat, as `CommitHistory` keeps it
    current_lag: int
    complete: float

    @property
    def commits(self) -> list[Commit]:
        return commits_of(self.window)

    @property
    def newest_offset(self) -> int | None:
        return self.window[-STRIDE + OFFSET] if self.window else None


@dataclass(frozen=True)
class GroupStatus:
    group: str
    status: int
    partitions: list[PartitionStatus]
    complete: float
    total_lag: int
    maxlag: PartitionStatus | None


def evaluate(
    group_id: str,
    view: GroupOffsets,
    windows: Mapping[tuple[str, int], Window],
    tracker: LagTracker,
    sampled: SampledEnds,
    *,
    intervals: int,
    now_ms: int,
) -> GroupStatus:
    """Burrow's ``evaluateConsumerStatus`` over the mirror's window, current lag and ring of
    sampled ends: one entry per partition the group has committed to (or is assigned and has a
    window for), topics named, in (topic, partition) order.  Current lag is messages behind the
    round's end (0 when the end or the committed offset is not known, as Burrow's)."""
    r = tracker.round
    ends_of = r.partitions if r is not None else {}
    names = tracker.topic_names
    committed: dict[tuple[str, int], int | None] = {
        (names.get(t, t), p): v[0] for (t, p), v in view.offsets.items()
    }
    owners = {(names.get(t, t), p): o for (t, p), o in view.owners.items()}
    for tp in owners:
        if tp not in committed and tp in windows:
            committed[tp] = None  # assigned, not committed, but with a window (offset deleted)
    end_of = tracker.end_of
    parts: list[PartitionStatus] = []
    for tp in sorted(committed):
        c = committed[tp]
        w = windows.get(tp, ())
        ends = ends_of.get(tp)
        current = 0 if c is None or ends is None else max(0, end_of(ends) - c)
        status = partition_status(w, current, sampled.recent(tp), now_ms) if current > 0 and w else OK
        owner = owners.get(tp, NO_OWNER)
        parts.append(
            PartitionStatus(
                tp[0],
                tp[1],
                owner.member_host if owner.member_host != UNKNOWN else "",
                owner.client_id if owner.client_id != UNKNOWN else "",
                status,
                w,
                current,
                min(1.0, len(w) // STRIDE / intervals) if intervals else 1.0,
            )
        )
    status = group_status(p.status for p in parts)
    maxlag = max(parts, key=lambda p: p.current_lag, default=None)
    complete = sum(1 for p in parts if p.complete == 1.0) / len(parts) if parts else 0.0
    return GroupStatus(group_id, status, parts, complete, sum(p.current_lag for p in parts), maxlag)


_NEVER: Final = 2**63 - 1


def _rule3_at(gs: GroupStatus, now_ms: int) -> int:
    """The earliest time after which Rule 3 turns true for a partition of the group (`rule3_flips_at`)."""
    at = _NEVER
    for p in gs.partitions:
        flip = rule3_flips_at(p.window, p.current_lag, p.status, now_ms)
        if flip is not None and flip < at:
            at = flip
    return at


class StatusWatcher:
    """Status changes between evaluations, as change events (``group_status_changed``,
    ``offset_rewound``, ``partition_stalled``); the latest statuses for the metrics."""

    def __init__(self, max_events: int = 1000) -> None:
        self.groups: dict[str, int] = {}
        self.partitions: dict[tuple[str, str, int], int] = {}
        self._keys: dict[str, list[tuple[str, str, int]]] = {}  # group -> its keys in partitions
        self.events: deque[dict[str, Any]] = deque(maxlen=max_events)

    def update(
        self, statuses: Iterable[GroupStatus], now_ms: int, removed: Iterable[str] | None = None
    ) -> list[dict[str, Any]]:
        """The statuses of the groups evaluated.  ``removed`` None: ``statuses`` are every group
        (the others are gone); else only those groups changed, and ``removed`` are gone."""
        out: list[dict[str, Any]] = []
        seen: set[str] = set()
        for gs in statuses:
            seen.add(gs.group)
            before = self.groups.get(gs.group)
            if before is not None and before != gs.status:
                out.append(
                    _event(
                        "group_status_changed",
                        gs.group,
                        now_ms,
                        before=STATUS_NAMES[before],
                        after=STATUS_NAMES[gs.status],
                    )
                )
            self.groups[gs.group] = gs.status
            keys: list[tuple[str, str, int]] = []
            for p in gs.partitions:
                key = (gs.group, p.topic, p.partition)
                keys.append(key)
                if p.status != self.partitions.get(key) and p.status in (REWIND, STALL):
                    etype = "offset_rewound" if p.status == REWIND else "partition_stalled"
                    out.append(
                        _event(
                            etype,
                            gs.group,
                            now_ms,
                            topic=p.topic,
                            partition=p.partition,
                            offset=p.newest_offset,
                        )
                    )
            for key in self._keys.get(gs.group, ()):
                self.partitions.pop(key, None)
            for key, p in zip(keys, gs.partitions, strict=True):
                self.partitions[key] = p.status
            self._keys[gs.group] = keys
        gone = (
            [g for g in self.groups if g not in seen]
            if removed is None
            else [g for g in removed if g not in seen]
        )
        for gid in gone:
            self.groups.pop(gid, None)
            for key in self._keys.pop(gid, ()):
                self.partitions.pop(key, None)
        self.events.extend(out)
        return out


def _event(etype: str, group: str, now_ms: int, **fields: Any) -> dict[str, Any]:
    return {"type": etype, "group_id": group, "timestamp_ms": now_ms, **fields}


# ----------------------------------------------------------------------------- HTTP (v3)
def _offset_json(c: Commit | None) -> dict[str, Any] | None:
    """Burrow's ``ConsumerOffset``: offset, commit time, when the offset was stored, lag then."""
    return None if c is None else {"offset": c[0], "timestamp": c[1], "observedAt": c[3], "lag": c[2]}


def _partition_status_json(p: PartitionStatus) -> dict[str, Any]:
    return {
        "topic": p.topic,
        "partition": p.partition,
        "owner": p.owner,
        "client_id": p.client_id,
        "status": STATUS_NAMES[p.status],
        "start": _offset_json(commits_of(p.window[:STRIDE])[0]) if p.window else None,
        "end": _offset_json(commits_of(p.window[-STRIDE:])[0]) if p.window else None,
        "current_lag": p.current_lag,
        "complete": p.complete,
    }


def status_json(gs: GroupStatus, cluster: str, show_all: bool) -> dict[str, Any]:
    parts = gs.partitions if show_all else [p for p in gs.partitions if p.status > OK]
    return {
        "cluster": cluster,
        "group": gs.group,
        "status": STATUS_NAMES[gs.status],
        "complete": gs.complete,
        "partitions": [_partition_status_json(p) for p in parts],
        "partition_count": len(gs.partitions),
        "maxlag": None if gs.maxlag is None else _partition_status_json(gs.maxlag),
        "totallag": gs.total_lag,
    }


#: groups evaluated between two calls of `Burrow.evaluate_all`'s ``pause``
PACE_GROUPS: Final = 250


class Burrow:
    """The window, the evaluator and the watcher together, for the routes and the metrics."""

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
        self.watcher = StatusWatcher()
        self.host = socket.gethostname()
        #: group -> re-evaluate once the time passes this (Rule 3 turns true), for the groups whose
        #: inputs did not change
        self._recheck: dict[str, int] = {}
        self._last_now: int | None = None
        self.last_evaluated = 0  # groups evaluated by the last `evaluate_all`

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

    def evaluate_all(
        self, now_ms: int, *, full: bool = False, pause: Callable[[float], object] | None = None
    ) -> list[dict[str, Any]]:
        """One evaluation after each offsets round: the change events.

        Only the groups whose status can have changed are evaluated (``full``: every group; the
        results are the same, tests/test_streaming/test_burrow_incremental.py).  A partition's
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
            self._recheck[gid] = _rule3_at(gs, now_ms)
        if removed is None:
            live = {gs.group for gs in statuses}
            self._recheck = {gid: at for gid, at in self._recheck.items() if gid in live}
        self.last_evaluated = len(todo)
        return self.watcher.update(statuses, now_ms, removed)

    # -- routes ----------------------------------------------------------------------------
    def _reply(self, path: str, message: str, **body: Any) -> dict[str, Any]:
        return {"error": False, "message": message, **body, "request": {"url": path, "host": self.host}}

    def _not_found(self, path: str, message: str) -> tuple[int, dict[str, Any]]:
        return 404, {"error": True, "message": message, "request": {"url": path, "host": self.host}}

    def route(self, path: str, now_ms: int) -> tuple[int, dict[str, Any]] | None:
        """``GET`` of a Burrow v3 path -> (HTTP status, JSON body); None: not a Burrow path."""
        parts = [unquote(x) for x in path.strip("/").split("/")]
        if parts[:2] != ["v3", "kafka"]:
            return None
        if len(parts) == 2:
            return 200, self._reply(path, "cluster list returned", clusters=[self.cluster])
        if parts[2] != self.cluster:
            return self._not_found(path, "cluster not found")
        if len(parts) == 3:
            return 200, self._reply(
                path, "cluster module detail returned", module={"class-name": "coordinator-mirror"}
            )
        if parts[3] == "topic":
            return self._topic_route(path, parts[4:])
        if parts[3] != "consumer":
            return self._not_found(path, "not found")
        if len(parts) == 4:
            return 200, self._reply(path, "consumer list returned", consumers=self.history.groups())
        group = parts[4]
        if len(parts) == 5:
            topics = self.consumer_detail(group)
            if topics is None:
                return self._not_found(path, "cluster or consumer not found")
            return 200, self._reply(path, "consumer detail returned", topics=topics)
        if len(parts) == 6 and parts[5] in ("status", "lag"):
            gs = self.status(group, now_ms)
            if gs is None:
                return self._not_found(path, "cluster or consumer not found")
            body = status_json(gs, self.cluster, show_all=parts[5] == "lag")
            return 200, self._reply(path, "consumer status returned", status=body)
        return self._not_found(path, "not found")

    def _topic_route(self, path: str, rest: list[str]) -> tuple[int, dict[str, Any]]:
        """Burrow's topic paths: ``/topic`` (the topics whose log ends the mirror reads: those
        some mirrored group commits to or is assigned), ``/topic/{topic}`` (each partition's
        latest offset -- the high watermark, as Burrow reads it -- indexed by partition; null for a
        partition no group uses, whose end the mirror does not read) and
        ``/topic/{topic}/consumers`` (the groups with a committed offset or an assignment on it)."""
        r = self.tracker.round
        parts = r.partitions if r is not None else {}
        if not rest:
            topics = sorted({t for t, _ in parts})
            return 200, self._reply(path, "topic list returned", topics=topics)
        topic = rest[0]
        if len(rest) == 1:
            ends = {p: e.high_watermark for (t, p), e in parts.items() if t == topic}
            if not ends:
                return self._not_found(path, "cluster or topic not found")
            offsets = [ends.get(p) for p in range(max(ends) + 1)]
            return 200, self._reply(path, "topic offsets returned", offsets=offsets)
        if len(rest) == 2 and rest[1] == "consumers":
            return 200, self._reply(path, "consumers of topic returned", consumers=self.consumers_of(topic))
        return self._not_found(path, "not found")

    def consumers_of(self, topic: str) -> list[str]:
        """The groups (of Burrow's consumer list) with a committed offset on or an assignment of a
        partition of ``topic`` (named as the cluster names it)."""
        names = self.tracker.topic_names
        out = []
        for gid in self.history.groups():
            view = self.tracker.view(gid)
            if view is not None and any(names.get(t, t) == topic for t, _ in (*view.offsets, *view.owners)):
                out.append(gid)
        return out

    def consumer_detail(self, group_id: str) -> dict[str, list[dict[str, Any]]] | None:
        """Burrow's ``ConsumerTopics``: topic -> partitions indexed by partition id, each with its
        window of ``intervals`` offsets (null where not filled yet, oldest first)."""
        window = self.history.window(group_id)
        rows = self.tracker.group_lag(group_id)
        if window is None or rows is None:
            return None
        by_tp = {(r.topic, r.partition): r for r in rows}
        topics: dict[str, list[dict[str, Any]]] = {}
        for t in sorted({t for t, _ in window} | {t for t, _ in by_tp}):
            n = 1 + max(p for tt, p in (*window, *by_tp) if tt == t)
            out = []
            for p in range(n):
                commits = commits_of(window.get((t, p), []))
                row = by_tp.get((t, p))
                pad: list[dict[str, Any] | None] = [None] * (self.intervals - len(commits))
                lag = 0 if row is None or row.lag != row.lag else int(row.lag)
                out.append(
                    {
                        "offsets": pad + [_offset_json(c) for c in commits] if commits else [],
                        "owner": ""
                        if row is None or row.owner.member_host == "unknown"
                        else row.owner.member_host,
                        "client_id": ""
                        if row is None or row.owner.client_id == "unknown"
                        else row.owner.client_id,
                        "current-lag": lag,
                    }
                )
            topics[t] = out
        return topics


def lag_route(
    tracker: LagTracker,
    burrow: Burrow | None,
    path: str,
    now_ms: int,
    *,
    filtered: Callable[[str], bool] | None = None,
    mirrored: Callable[[str], bool] | None = None,
) -> tuple[int, dict[str, Any]] | None:
    """The lag side of the HTTP API: Burrow's ``/v3/kafka/...`` paths, and
    ``GET /groups/{id}/lag`` -- per partition committed offset, end, lag in messages and seconds,
    owner, ``topic_deleted``; the group's ``deleted_topics`` -- with the round's sample time
    (``sampled_at_ms``: how fresh the figures are).  None: not one of these paths.

    A group without lag is a 404 ``group_not_found`` whose ``reason`` says why (`not_found_reason`):
    ``filtered`` (``filtered(id)``: the group filter excludes it), ``deleted`` (deleted in the log
    while the mirror ran), ``pending`` (``mirrored(id)``: in the mirror, not applied to the lag
    tracker yet) or ``unknown``."""
    if burrow is not None and path.startswith("/v3/"):
        return burrow.route(path, now_ms)
    if path.startswith("/groups/") and path.endswith("/lag"):
        group_id = unquote(path[len("/groups/") : -len("/lag")])
        rows = tracker.group_lag(group_id)
        view = tracker.groups.get(group_id)
        if rows is None or view is None:
            reason, message = not_found_reason(tracker, group_id, filtered, mirrored)
            body = {"error": "group_not_found", "group_id": group_id, "reason": reason, "message": message}
            return 404, body
        r = tracker.round
        return 200, {
            "group_id": group_id,
            "isolation": tracker.isolation,
            "sampled_at_ms": None if r is None else r.sampled_at_ms,
            "deleted_topics": tracker.deleted_topics(view, rows),
            "partitions": lag_json(rows),
        }
    return None


def not_found_reason(
    tracker: LagTracker,
    group_id: str,
    filtered: Callable[[str], bool] | None,
    mirrored: Callable[[str], bool] | None,
) -> tuple[str, str]:
    """Why ``GET /groups/{id}/lag`` has no lag for a group: (reason, message)."""
    if filtered is not None and filtered(group_id):
        return "filtered", "the group filter (group_allow_regex / group_deny_regex) excludes this group"
    if group_id in tracker.deleted:
        return "deleted", "the group was deleted in the log (tombstone, DeleteGroups or expiry)"
    if mirrored is not None and mirrored(group_id):
        return "pending", "mirrored, not in the lag tracker yet: applied before the next lag round"
    return "unknown", "the mirror has no such group"
