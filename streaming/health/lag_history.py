"""The lag history: every group's lag -- the group's and each partition's, in messages and in
seconds -- at each lag round of the last ``lag_history_minutes``, for the web UI's charts
(``GET /groups/{id}/history``) and the groups list's lag columns.

Fed through the lag tracker's round listener (`LagTracker.listeners`, the hook Burrow's ring of
sampled ends uses too): after each round it takes every group's lag from the tracker's own
`LagTracker.lag_rows`, so a point is exactly what ``GET /groups/{id}/lag`` and the lag metrics
answered at that round.  Nothing else of the tracker is read -- not its lookup tables, which
may be repacked -- beyond the groups' views, the topic names and the round itself.

Bounded, in time and in bytes:

* every round is kept for the newest `FULL_RESOLUTION_MS` (10 minutes); older rounds are thinned
  to one point a minute -- the minute's largest lag and largest lag in seconds, so that a peak
  survives -- and points older than the horizon (``lag_history_minutes``) are dropped;
* a group's row (one round) is stored time-invariant: per partition its lag in messages and
  *since*, the time its log end passed the committed offset, so that its lag in seconds at a round
  is that round's time minus since (`CAUGHT_UP`: 0 s).  A group at its log ends everywhere
  (or unknown where not) whose view is the same object as at the previous round, whose
  partitions' log ends did not move and whose topic names did not change has the same row: it is
  not computed again, and the same row object is kept.  A group behind anywhere is computed at
  every round -- its lag in seconds may change without any input moving, the tracker
  extrapolating along a window whose newest point moves with the clock -- and keeps its previous
  row object when the values are the same;
* a group's rows of one minute are packed when the minute is over: int64 columns, each row as its
  difference from the previous one, zlib-compressed; a minute whose rows are all the previous
  minute's row shares that minute's packed bytes.  Measured by bench/lag_history.py (docs/ui.md).

Where a round's work goes: the rows of the groups computed (`LagTracker.lag_rows`, what the lag
exposition pays per group at a scrape); the others cost a set lookup per partition.
"""

from __future__ import annotations

import math
import threading
import time
import zlib
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from streaming.health.lag import GroupOffsets, LagTracker, LogOffsets, PartitionLag

#: a lag or a since that is not known (no log end, nothing committed, too few samples)
UNKNOWN: Final = -1
#: a since of a partition at its log end: 0 s behind
CAUGHT_UP: Final = -2
#: every round is kept this long; older rounds are thinned to one point a minute
FULL_RESOLUTION_MS: Final = 10 * 60_000
BUCKET_MS: Final = 60_000
#: thinned (one-a-minute) rows packed together
THINNED_BLOCK: Final = 10
#: the trend is the slope of the group's lag over this much of its newest history
TREND_MS: Final = 5 * 60_000
#: groups computed between two calls of the ``pause`` (`LagHistory`)
PACE_GROUPS: Final = 250
#: columns before the partitions' in a row: the group's lag (abandoned topics left out, as
#: kafka_consumergroup_group_sum_lag) and its since (the largest lag in seconds, as _max_lag_seconds)
GROUP_COLUMNS: Final = 2

TopicPartition = tuple[str, int]
Ints = npt.NDArray[np.int64]
_NO_ABANDONED: Final[frozenset[TopicPartition]] = frozenset()
#: a round's row of a group: (row, keys, abandoned keys, reusable at the next round)
_Computed = tuple["array[int]", tuple[TopicPartition, ...], frozenset[TopicPartition], bool]


@dataclass(frozen=True, slots=True)
class Chunk:
    """Rows of one group with one set of partitions: ``times`` (int64 ms) and the packed rows --
    ``len(keys)`` partitions, each row ``[group lag, group since, lag per partition..., since per
    partition...]`` as its difference from the previous row, zlib-compressed."""

    keys: tuple[TopicPartition, ...]
    abandoned: frozenset[TopicPartition]
    times: bytes
    blob: bytes
    #: the time the packed sinces are relative to (the group's first round: `pack`)
    base: int

    @property
    def width(self) -> int:
        return GROUP_COLUMNS + 2 * len(self.keys)

    def decode(self) -> tuple[Ints, Ints]:
        """(times, rows x columns matrix), both int64."""
        times = np.frombuffer(self.times, dtype=np.int64)
        return times, unpack(self.blob, len(times), self.width, self.base)

    def stored_bytes(self) -> int:
        return len(self.times) + len(self.blob)


#: the narrowest integer type holding a chunk's differences, by its one-byte code
_DTYPES: Final = (np.int8, np.int16, np.int32, np.int64)
_RANGES: Final = tuple((-(2 ** (8 * n - 1)), 2 ** (8 * n - 1) - 1) for n in (1, 2, 4, 8))


def _since_columns(width: int) -> list[int]:
    n = (width - GROUP_COLUMNS) // 2
    return [1, *range(GROUP_COLUMNS + n, GROUP_COLUMNS + 2 * n)]


def pack(rows: Ints, t_ref: int) -> bytes:
    """Rows -> bytes: each row as its difference from the previous one, column after column (a
    partition's values side by side: an unchanged column is a run of zeros), in the narrowest
    integer type that holds them, zlib-compressed.  A since is stored as twice its difference from
    ``t_ref`` (the group's first round), the sentinels as odd numbers (`UNKNOWN` 1, `CAUGHT_UP` 3):
    four bytes where the time itself needs eight, and the same bytes for the same rows in any
    minute.  Busy partitions' differences fit in one or two bytes."""
    rows = rows.copy()
    cols = _since_columns(rows.shape[1])
    since = rows[:, cols]
    rows[:, cols] = np.where(since >= 0, 2 * (since - t_ref), np.where(since == UNKNOWN, 1, 3))
    deltas = np.diff(rows, axis=0, prepend=np.zeros((1, rows.shape[1]), dtype=np.int64)).T
    lo, hi = (int(deltas.min()), int(deltas.max())) if deltas.size else (0, 0)
    code = next(i for i, (low, high) in enumerate(_RANGES) if low <= lo and hi <= high)
    return bytes([code]) + zlib.compress(np.ascontiguousarray(deltas, dtype=_DTYPES[code]).tobytes(), 6)


def unpack(blob: bytes, rows: int, width: int, t_ref: int) -> Ints:
    deltas = np.frombuffer(zlib.decompress(blob[1:]), dtype=_DTYPES[blob[0]]).reshape(width, rows).T
    out = np.cumsum(deltas, axis=0, dtype=np.int64)
    cols = _since_columns(width)
    stored = out[:, cols]
    out[:, cols] = np.where(stored % 2 == 0, stored // 2 + t_ref, np.where(stored == 1, UNKNOWN, CAUGHT_UP))
    return out


def thin(times: Ints, rows: Ints, n_partitions: int) -> Ints:
    """One row standing for ``rows`` (one minute) at ``times[-1]``: each lag column's largest
    known value, each since column the one giving the largest lag in seconds at that time."""
    out = np.empty(rows.shape[1], dtype=np.int64)
    lag_cols = [0, *range(GROUP_COLUMNS, GROUP_COLUMNS + n_partitions)]
    since_cols = [1, *range(GROUP_COLUMNS + n_partitions, GROUP_COLUMNS + 2 * n_partitions)]
    lags = rows[:, lag_cols]
    out[lag_cols] = np.where((lags >= 0).any(axis=0), lags.max(axis=0), UNKNOWN)
    since = rows[:, since_cols]
    at = times[:, None]
    behind = np.where(since >= 0, at - since, np.where(since == CAUGHT_UP, 0, -1))
    worst = behind.max(axis=0)
    any_since = (since >= 0).any(axis=0)
    any_caught_up = (since == CAUGHT_UP).any(axis=0)
    out[since_cols] = np.where(
        any_since, times[-1] - np.maximum(worst, 0), np.where(any_caught_up, CAUGHT_UP, UNKNOWN)
    )
    return out


class _Series:
    """One group's history: the current minute's rows, the sealed minutes, the thinned blocks."""

    __slots__ = (
        "abandoned",
        "base",
        "carry",
        "chunks",
        "keys",
        "last_t",
        "open_rows",
        "open_times",
        "row",
        "thinned",
        "uniform",
        "view",
    )

    def __init__(self) -> None:
        self.view: GroupOffsets | None = None
        self.keys: tuple[TopicPartition, ...] = ()
        self.abandoned: frozenset[TopicPartition] = _NO_ABANDONED
        #: the newest row, its round's time, and whether the next round may reuse it unchanged
        self.row: array[int] | None = None
        self.last_t = 0
        self.carry = False
        #: the time its packed sinces are relative to (its first round)
        self.base = 0
        #: the rows of the minute being filled (the same row object repeated while unchanged)
        self.open_times: array[int] = array("q")
        self.open_rows: list[array[int]] = []
        self.chunks: list[Chunk] = []
        self.thinned: list[Chunk] = []
        #: the last sealed minute when all its rows were one row object: (row, rows, chunk)
        self.uniform: tuple[array[int], int, Chunk] | None = None


class LagHistory:
    """Group id -> its lag at each round of the last ``minutes`` (every round for the newest 10
    minutes, one point a minute before).  ``minutes`` 0 keeps only each group's newest round (the
    groups list's lag columns).  Registers itself on ``tracker``'s round listeners.

    ``pause``: called after every `PACE_GROUPS` groups computed with the thread CPU seconds they
    took (the driver waits as long there, as it paces Burrow's evaluation: a round that computes
    thousands of groups then takes at most half a core from the micro-batches running meanwhile)."""

    def __init__(
        self,
        tracker: LagTracker,
        minutes: int = 60,
        interval_s: float | None = None,
        pause: Callable[[float], object] | None = None,
    ) -> None:
        self.tracker = tracker
        self.pause = pause
        self.horizon_ms = max(0, minutes) * 60_000
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._series: dict[str, _Series] = {}
        self._ends: dict[TopicPartition, int] = {}
        self._names: dict[str, str] = {}
        self.rounds = 0
        #: groups whose row the last round computed (the others kept theirs)
        self.last_computed = 0
        self.sampled_at_ms: int | None = None
        tracker.listeners.append(self.on_round)

    # -- the writer (the lag loop's thread, from `LagTracker.apply_round`) ---------------------
    def on_round(self, r: LogOffsets) -> None:
        tracker = self.tracker
        at = r.sampled_at_ms
        end_of = tracker.end_of
        ends = {tp: end_of(e) for tp, e in r.partitions.items()}
        before = self._ends
        moved = {tp for tp, end in ends.items() if before.get(tp) != end}
        moved.update(before.keys() - ends.keys())
        names = dict(tracker.topic_names)
        renamed = names != self._names
        self._ends, self._names = ends, names
        items = tracker.items()
        live = {gid for gid, _ in items}
        computed = 0
        busy_from = time.thread_time()
        for gid, view in items:
            s = self._series.get(gid)
            if s is None:
                s = _Series()
            if (
                s.row is not None
                and s.carry
                and s.view is view
                and not renamed
                and not (moved and any(tp in moved for tp in s.keys))
            ):
                row, keys, abandoned, carry = s.row, s.keys, s.abandoned, True
            else:
                row, keys, abandoned, carry = _row(tracker.lag_rows(view), at, tracker.keys.key)
                computed += 1
                if self.pause is not None and computed % PACE_GROUPS == 0:
                    self.pause(time.thread_time() - busy_from)
                    busy_from = time.thread_time()
                if keys == s.keys:
                    keys = s.keys
                    if s.row is not None and row == s.row:
                        row = s.row  # the same row object: an unchanged minute shares its packed bytes
            with self._lock:
                self._append(s, view, (row, keys, abandoned, carry), at)
                self._series.setdefault(gid, s)
        with self._lock:
            for gid in [g for g in self._series if g not in live]:
                del self._series[gid]
            self.rounds += 1
            self.last_computed = computed
            self.sampled_at_ms = at

    def _append(self, s: _Series, view: GroupOffsets, computed: _Computed, at: int) -> None:
        row, keys, abandoned, carry = computed
        if at <= s.last_t:
            return  # a round not newer than the last one (the clock went back): not a point
        if s.open_times and (keys is not s.keys or at // BUCKET_MS != s.open_times[-1] // BUCKET_MS):
            self._seal(s)
        if s.row is None:
            s.base = at
        s.view, s.row, s.carry, s.last_t = view, row, carry, at
        s.keys, s.abandoned = keys, abandoned
        if self.horizon_ms <= 0:
            return
        s.open_times.append(at)
        s.open_rows.append(row)
        self._age(s, at)

    def _seal(self, s: _Series) -> None:
        """The open minute's rows packed into a chunk."""
        rows, times = s.open_rows, s.open_times
        first = rows[0]
        uniform = all(r is first for r in rows)
        if uniform and s.uniform is not None and s.uniform[0] is first and s.uniform[1] == len(rows):
            blob = s.uniform[2].blob  # the same rows as the previous minute: its packed bytes
        else:
            blob = pack(np.array(rows, dtype=np.int64), s.base)
        chunk = Chunk(s.keys, s.abandoned, times.tobytes(), blob, s.base)
        s.chunks.append(chunk)
        s.uniform = (first, len(rows), chunk) if uniform else None
        s.open_times, s.open_rows = array("q"), []

    def _age(self, s: _Series, now: int) -> None:
        """Minutes older than the full resolution thinned, points older than the horizon dropped."""
        full_from = now - min(FULL_RESOLUTION_MS, self.horizon_ms)
        keep_from = now - self.horizon_ms
        while s.chunks and np.frombuffer(s.chunks[0].times, dtype=np.int64)[-1] < full_from:
            chunk = s.chunks.pop(0)
            if self.horizon_ms <= FULL_RESOLUTION_MS:
                continue
            times, rows = chunk.decode()
            self._add_thinned(s, chunk, int(times[-1]), thin(times, rows, len(chunk.keys)))
        while s.thinned and np.frombuffer(s.thinned[0].times, dtype=np.int64)[-1] < keep_from:
            s.thinned.pop(0)

    @staticmethod
    def _add_thinned(s: _Series, source: Chunk, at: int, row: Ints) -> None:
        last = s.thinned[-1] if s.thinned else None
        if last is not None and last.keys is source.keys and len(last.times) // 8 < THINNED_BLOCK:
            times, rows = last.decode()
            times = np.append(times, at)
            rows = np.vstack([rows, row])
            s.thinned[-1] = Chunk(last.keys, last.abandoned, times.tobytes(), pack(rows, s.base), s.base)
        else:
            s.thinned.append(
                Chunk(
                    source.keys,
                    source.abandoned,
                    np.array([at], dtype=np.int64).tobytes(),
                    pack(row[None, :], s.base),
                    s.base,
                )
            )

    # -- readers (HTTP) ------------------------------------------------------------------------
    def latest(self, group_id: str) -> tuple[int | None, float | None] | None:
        """The group's lag in messages (abandoned topics left out) and its largest lag in seconds
        at the newest round, None when the group has no row (yet)."""
        with self._lock:
            s = self._series.get(group_id)
            if s is None or s.row is None:
                return None
            row, t = s.row, s.last_t
        return _lag(row[0]), _seconds(t, row[1])

    def latest_all(self) -> dict[str, tuple[int | None, float | None]]:
        """`latest` of every group with a row (the groups list joins it, sorts and filters on it)."""
        with self._lock:
            now = [(gid, s.row, s.last_t) for gid, s in self._series.items()]
        return {gid: (_lag(row[0]), _seconds(t, row[1])) for gid, row, t in now if row is not None}

    def series(self, group_id: str) -> dict[str, Any] | None:
        """The group's history as ``GET /groups/{id}/history`` answers it (None: no such group)."""
        with self._lock:
            s = self._series.get(group_id)
            if s is None:
                return None
            chunks = [*s.thinned, *s.chunks]
            open_part = (
                (
                    s.keys,
                    s.abandoned,
                    np.frombuffer(s.open_times.tobytes(), dtype=np.int64),
                    list(s.open_rows),
                )
                if s.open_rows
                else None
            )
        segments: list[tuple[tuple[TopicPartition, ...], frozenset[TopicPartition], Ints, Ints]] = []
        for c in chunks:
            times, rows = c.decode()
            segments.append((c.keys, c.abandoned, times, rows))
        if open_part is not None:
            keys, abandoned, times, rows_list = open_part
            segments.append((keys, abandoned, times, np.array(rows_list, dtype=np.int64)))
        return render(group_id, segments, self.horizon_ms, self.interval_s)

    def empty(self, group_id: str) -> dict[str, Any]:
        """``GET /groups/{id}/history`` for a group held but not measured by a lag round yet: no
        point (a 404 here would be an error in the group page's console at every refresh)."""
        return render(group_id, [], self.horizon_ms, self.interval_s)

    def stored_bytes(self) -> int:
        """The packed bytes held (chunks and the open minutes' rows), all groups -- the memory
        that grows with the history; objects and dictionaries come on top (bench/lag_history.py)."""
        with self._lock:
            series = list(self._series.values())
        total = 0
        seen: set[int] = set()
        for s in series:
            for c in (*s.chunks, *s.thinned):
                if id(c.blob) not in seen:
                    seen.add(id(c.blob))
                    total += len(c.blob)
                total += len(c.times)
            for r in s.open_rows:
                if id(r) not in seen:
                    seen.add(id(r))
                    total += 8 * len(r)
        return total

    def __len__(self) -> int:
        return len(self._series)


def _row(rows: Sequence[PartitionLag], at: int, key: Callable[[TopicPartition], TopicPartition]) -> _Computed:
    """A round's row from the tracker's lag rows: (row, keys, abandoned keys, reusable next round);
    ``key``: the tracker's shared key tuples (`KeyTable.key`) -- every group's keys are kept for
    as long as its history is, and a fresh tuple each was ~31 MB at 10k groups x 50 partitions."""
    n = len(rows)
    out = array("q", bytes(8 * (GROUP_COLUMNS + 2 * n)))
    total = 0
    known = False
    oldest: int | None = None
    caught_up = False
    carry = True
    abandoned: set[TopicPartition] = set()
    for i, x in enumerate(rows):
        lag = UNKNOWN if math.isnan(x.lag) else int(x.lag)
        secs = x.lag_seconds
        if math.isnan(secs):
            since = UNKNOWN
            if lag != UNKNOWN:
                carry = False  # its lag in seconds may become known without its end moving
        elif lag == 0:
            since = CAUGHT_UP
        else:
            since = at - round(secs * 1000)
            # behind: its lag in seconds can change without its end moving (outside the tracker's
            # window it is extrapolated along the window, whose newest point moves with the clock)
            carry = False
        out[GROUP_COLUMNS + i] = lag
        out[GROUP_COLUMNS + n + i] = since
        if x.abandoned:
            abandoned.add((x.topic, x.partition))
            continue
        if lag != UNKNOWN:
            total += lag
            known = True
        if since >= 0:
            oldest = since if oldest is None else min(oldest, since)
        elif since == CAUGHT_UP:
            caught_up = True
    out[0] = total if known else UNKNOWN
    out[1] = oldest if oldest is not None else (CAUGHT_UP if caught_up else UNKNOWN)
    keys = tuple(key((x.topic, x.partition)) for x in rows)
    return out, keys, frozenset(abandoned) if abandoned else _NO_ABANDONED, carry


def _lag(value: int) -> int | None:
    return None if value < 0 else int(value)


def _seconds(at: int, since: int) -> float | None:
    if since == CAUGHT_UP:
        return 0.0
    if since < 0:
        return None
    return max(0, at - since) / 1000


def render(
    group_id: str,
    segments: Iterable[tuple[tuple[TopicPartition, ...], frozenset[TopicPartition], Ints, Ints]],
    horizon_ms: int,
    interval_s: float | None,
) -> dict[str, Any]:
    """Segments (keys, abandoned, times, rows) oldest first -> the JSON of ``GET /groups/{id}/history``:
    one time axis, the group's two series and each partition's, null where a point is unknown."""
    times: list[int] = []
    group_lag: list[int | None] = []
    group_secs: list[float | None] = []
    per_key: dict[TopicPartition, tuple[list[int | None], list[float | None]]] = {}
    abandoned_keys: set[TopicPartition] = set()
    for keys, abandoned, ts, rows in segments:
        start = len(times)
        n = len(keys)
        for j, t in enumerate(ts.tolist()):
            row = rows[j].tolist()
            times.append(t)
            group_lag.append(_lag(row[0]))
            group_secs.append(_seconds(t, row[1]))
            for i, key in enumerate(keys):
                lags, secs = per_key.setdefault(key, ([None] * start, [None] * start))
                pad = start + j - len(lags)
                if pad > 0:
                    lags.extend([None] * pad)
                    secs.extend([None] * pad)
                lags.append(_lag(row[GROUP_COLUMNS + i]))
                secs.append(_seconds(t, row[GROUP_COLUMNS + n + i]))
        abandoned_keys = set(abandoned) if abandoned else set()
    for lags, secs in per_key.values():
        pad = len(times) - len(lags)
        if pad:
            lags.extend([None] * pad)
            secs.extend([None] * pad)
    return {
        "group_id": group_id,
        "interval_s": interval_s,
        "horizon_s": horizon_ms // 1000,
        "full_resolution_s": min(FULL_RESOLUTION_MS, horizon_ms) // 1000,
        "times_ms": times,
        "lag": group_lag,
        "lag_seconds": [None if v is None else round(v, 3) for v in group_secs],
        "trend": trend(times, group_lag),
        "partitions": [
            {
                "topic": key[0],
                "partition": key[1],
                "abandoned": key in abandoned_keys,
                "lag": per_key[key][0],
                "lag_seconds": [None if v is None else round(v, 3) for v in per_key[key][1]],
            }
            for key in sorted(per_key)
        ],
    }


def trend(times: Sequence[int], lag: Sequence[int | None]) -> dict[str, Any]:
    """The slope of the group's lag over its newest `TREND_MS` (least squares, messages per
    second: above 0 it falls behind, below 0 it catches up); null with fewer than three points."""
    if not times:
        return {"window_s": TREND_MS // 1000, "points": 0, "lag_per_second": None}
    newest = times[-1]
    pts = [(t, v) for t, v in zip(times, lag, strict=True) if v is not None and t >= newest - TREND_MS]
    slope = None
    if len(pts) >= 3:
        xs = np.array([(t - newest) / 1000 for t, _ in pts], dtype=float)
        ys = np.array([v for _, v in pts], dtype=float)
        dx = xs - xs.mean()
        denom = float((dx * dx).sum())
        if denom > 0:
            slope = round(float((dx * (ys - ys.mean())).sum()) / denom, 3)
    return {"window_s": TREND_MS // 1000, "points": len(pts), "lag_per_second": slope}
