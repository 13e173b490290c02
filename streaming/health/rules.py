"""Burrow's evaluation rules (linkedin/Burrow 1.9.5, ``core/internal/evaluator/caching.go``,
``calculatePartitionStatus`` and Rules 1-5) as small pure functions over a partition's window of
commits (`streaming.health.window`), each ``(offset, timestamp_ms, lag | -1, observed_ms)`` -- the
lag being the messages behind the log end read *before* the commit -- and `evaluate`, one group's
status from its window, its current lag and the ring of sampled ends.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple

from streaming.health.lag import NO_OWNER, UNKNOWN, GroupOffsets, LagTracker
from streaming.health.window import (
    LAG,
    OFFSET,
    STRIDE,
    TIMESTAMP,
    Commit,
    SampledEnds,
    Window,
    commits_of,
    window_of,
)

__all__ = ["commits_of", "window_of"]  # (the rules' tests build windows through this module)

# Burrow's StatusConstant (core/protocol/evaluator.go): ordered from good to bad
NOTFOUND: Final = 0
OK: Final = 1
WARN: Final = 2
ERR: Final = 3
STOP: Final = 4
STALL: Final = 5
REWIND: Final = 6
STATUS_NAMES: Final = ("NOTFOUND", "OK", "WARN", "ERR", "STOP", "STALL", "REWIND")

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


def rule3_at(gs: GroupStatus, now_ms: int) -> int:
    """The earliest time after which Rule 3 turns true for a partition of the group (`rule3_flips_at`)."""
    at = _NEVER
    for p in gs.partitions:
        flip = rule3_flips_at(p.window, p.current_lag, p.status, now_ms)
        if flip is not None and flip < at:
            at = flip
    return at
