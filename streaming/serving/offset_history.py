"""Every group's committed offsets over time -- "where was the group at 09:14?" (issue 38): kept on
the driver from the state bytes each micro-batch hands over, thinned with age, bounded by a
horizon, persisted next to the checkpoint so that it survives restarts.

**What a point is.**  One partition's committed offset from a moment on: ``(time, offset)``, where
the time is the commit's own timestamp (the broker's, in the offset commit record) -- so the
history is in the log's time, the same whether the mirror folded the commit live, after a restart
or from a backlog.  An offset that leaves the group (expired, deleted, the group deleted) is a
point with offset -1 at the time the log (or the mirror's expiry) removed it.  The offset in effect
at T is the newest point at or before T.

**Where the points come from.**  `OffsetHistory.on_batch` -- a hook of the query's sink, like the
lag loop's -- reads each changed group's committed offsets from its state bytes
(`state.codec.committed_offsets`: the offsets field alone, members skipped) and appends a point
for every partition whose offset changed.  A micro-batch holds the group's state after the batch,
and the prepare step collapses a run of commits to one partition into the newest, so the finest
resolution is one point per partition and micro-batch (``trigger_interval_s``): every commit of a
consumer that commits less often than that.  Share groups have no committed offsets; their
share-partitions' start offsets come from the ``__share_group_state`` query's store
(`on_share_state`).  At the first batch after a start every group of the store is compared with
the history (`seed`): commits made while the mirror was down were folded by the catch-up, groups
deleted meanwhile are marked deleted.

**Thinning.**  ``tiers`` are ``(age, step)`` pairs, oldest age last: points younger than the first
age are all kept (step 0), then one point per step -- the newest of each step, the offset in
effect at the step's end -- up to each age; beyond the horizon only each partition's newest point
is kept (what was in effect at the horizon).  A query in a thinned range is answered with the
newest point at or before it, so its answer is at most one step old (``resolution_ms`` in the
answer).  The newest minute of points lives in plain arrays; older points are kept per group
packed and compressed (delta-coded int64 columns, zlib), thinned again as they age.

**Persistence** (``path``: default ``<checkpoint_location>/offset-history`` on a local checkpoint):
a snapshot file rewritten every ``save_interval_s`` and at stop, and a journal each micro-batch's
new points are appended to as the history's thread folds them -- moments after the sink queued
them, off its path.  A crash in between loses those moments' points; the seed at the next start
puts back each partition's newest offset at its own commit time, so what is lost is only offsets
a partition held for less than that moment.  At start: the snapshot, then the journals written
after it.

Horizon and history start: the history answers for ``T`` at or after ``max(now - horizon, the
moment it began recording)``; before that an error names the limit.  What it answers and what it
cannot know: docs/insights.md ("Offsets as of a moment").
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import zlib
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import msgpack
import numpy as np

from state.codec import StateCodecError, committed_offsets
from state.share import decode as decode_share
from streaming.settings import Settings

log = logging.getLogger("coordinator_mirror.offset_history")

TopicPartition = tuple[str, int]
#: ``(max age ms, step ms)``: points younger than the age are kept one per step (0: all)
Tier = tuple[int, int]
#: the offset of a point that says "no committed offset from here on"
NO_OFFSET: Final = -1
#: points younger than this stay in plain arrays; older ones are packed (`OffsetHistory.maintain`)
HOT_MS: Final = 60_000
#: a group's packed points are thinned again at least this often (their ages cross tier limits)
RETHIN_MS: Final = 300_000
SNAPSHOT: Final = "snapshot.msgpack.z"
JOURNAL: Final = "journal-"
FORMAT: Final = 1
#: a journal's first entry: when the history began recording (the op's "group id" slot)
SINCE: Final = "#since"
#: the kind a share group's store summary names (`state.model.SHARE`)
SHARE: Final = "share"


# ------------------------------------------------------------------------------------- thinning
def thin(t: np.ndarray, idx: np.ndarray, now_ms: int, tiers: Sequence[Tier], horizon_ms: int) -> np.ndarray:
    """The indices of the points to keep (in the input's order): per partition (``idx``) every
    point younger than the first tier's age, then the newest point of each step of each tier and
    the oldest point within the horizon, beyond the horizon the newest point only.  ``t``: the
    points' times (ms)."""
    if len(t) == 0:
        return np.zeros(0, dtype=np.int64)
    age = now_ms - t
    limits = np.array([a for a, _ in tiers] + [horizon_ms], dtype=np.int64)
    steps = np.array([s for _, s in tiers] + [0], dtype=np.int64)
    tier = np.searchsorted(limits, age, side="right")  # 0..len(tiers): past the horizon
    tier = np.minimum(tier, len(tiers))
    step = np.where(tier < len(tiers), steps[np.minimum(tier, len(tiers))], 0)
    position = np.arange(len(t), dtype=np.int64)
    # the bucket of a point: its own position where every point is kept (step 0 within the
    # horizon), one bucket per step, one bucket for everything past the horizon
    bucket = np.where(step > 0, t // np.maximum(step, 1), position)
    bucket = np.where(tier == len(tiers), -1, bucket)
    order = np.lexsort((position, t, bucket, tier, idx))
    keys = np.stack([idx[order], tier[order], bucket[order]])
    last = np.ones(len(order), dtype=bool)
    last[:-1] = np.any(keys[:, 1:] != keys[:, :-1], axis=0)
    keep = order[last]
    # and each partition's oldest point within the horizon: a step's newest point stands for the
    # steps after it, so without it the first step of a partition's history would answer nothing
    inside = np.flatnonzero(tier < len(tiers))
    if len(inside):
        by_age = inside[np.lexsort((position[inside], t[inside], idx[inside]))]
        first = np.ones(len(by_age), dtype=bool)
        first[1:] = idx[by_age][1:] != idx[by_age][:-1]
        keep = np.union1d(keep, by_age[first])
    return np.sort(keep)


def pack(t: np.ndarray, idx: np.ndarray, off: np.ndarray) -> bytes:
    """Points -> compressed bytes: sorted by partition and time, each column delta-coded."""
    if len(t) == 0:
        return b""
    order = np.lexsort((t, idx))
    cols = np.stack([idx[order], t[order], off[order]]).astype(np.int64)
    deltas = np.diff(cols, axis=1, prepend=0)
    return zlib.compress(deltas.astype("<i8").tobytes(), 1)


def unpack(blob: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not blob:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z
    deltas = np.frombuffer(zlib.decompress(blob), dtype="<i8").reshape(3, -1)
    idx, t, off = np.cumsum(deltas, axis=1)
    return t, idx, off


# ---------------------------------------------------------------------------------- one group
class GroupLog:
    """One group's history: its partitions, the newest point of each, its points (recent ones in
    an array, older ones packed) and when it existed."""

    __slots__ = (
        "cold",
        "hot",
        "index",
        "keys",
        "kind",
        "last_ms",
        "last_off",
        "spans",
        "thinned_ms",
    )

    def __init__(self) -> None:
        self.keys: list[TopicPartition] = []
        self.index: dict[TopicPartition, int] = {}
        #: per partition the newest point's offset (-1: none) and time
        self.last_off = array("q")
        self.last_ms = array("q")
        #: recent points, flat (time, partition index, offset) triples, in arrival order
        self.hot = array("q")
        #: older points, `pack`ed
        self.cold = b""
        self.thinned_ms = 0
        #: the group's kind as the store names it (classic, simple, consumer, share, streams)
        self.kind: str | None = None
        #: [start, end or None] of each time the group existed, as the mirror observed it
        self.spans: list[list[int | None]] = []

    def slot(self, tp: TopicPartition) -> int:
        i = self.index.get(tp)
        if i is None:
            i = self.index[tp] = len(self.keys)
            self.keys.append(tp)
            self.last_off.append(NO_OFFSET)
            self.last_ms.append(0)
        return i

    def add(self, i: int, t: int, offset: int) -> bool:
        """A point for partition ``i`` if its offset changed; True when one was added."""
        if self.last_off[i] == offset:
            return False
        self.last_off[i] = offset
        self.last_ms[i] = t
        self.hot.extend((t, i, offset))
        return True

    @property
    def alive(self) -> bool:
        return bool(self.spans) and self.spans[-1][1] is None

    def open(self, t: int) -> None:
        if not self.alive:
            self.spans.append([t, None])
        elif self.spans[-1][0] is not None and t < int(self.spans[-1][0]):
            self.spans[-1][0] = t  # a commit older than the first sight: it existed then

    def close(self, t: int) -> None:
        if self.alive:
            start = self.spans[-1][0]
            self.spans[-1][1] = max(t, int(start) if start is not None else t)

    def points(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every point: (times, partition indices, offsets), cold then hot."""
        t, idx, off = unpack(self.cold)
        if self.hot:
            h = np.frombuffer(self.hot, dtype=np.int64).reshape(-1, 3)
            t = np.concatenate([t, h[:, 0]])
            idx = np.concatenate([idx, h[:, 1]])
            off = np.concatenate([off, h[:, 2]])
        return t, idx, off

    def settle(self, now_ms: int, tiers: Sequence[Tier], horizon_ms: int, *, force: bool = False) -> bool:
        """Pack the points older than `HOT_MS` with the older ones and thin them all; True when
        something was done (nothing is due: the hot points are recent and the packed ones were
        thinned within `RETHIN_MS`)."""
        h = self.hot
        due_hot = bool(h) and now_ms - h[0] > HOT_MS
        if not (force or due_hot or (self.cold and now_ms - self.thinned_ms > RETHIN_MS)):
            return False
        t, idx, off = self.points()
        keep = thin(t, idx, now_ms, tiers, horizon_ms)
        t, idx, off = t[keep], idx[keep], off[keep]
        recent = now_ms - t <= HOT_MS
        self.cold = pack(t[~recent], idx[~recent], off[~recent])
        hot = np.stack([t[recent], idx[recent], off[recent]], axis=1).astype(np.int64)
        self.hot = array("q", hot.tobytes()) if len(hot) else array("q")
        self.thinned_ms = now_ms
        return True

    def at(self, at_ms: int) -> dict[int, tuple[int, int]]:
        """Per partition index the point in effect at ``at_ms``: (offset, time)."""
        t, idx, off = self.points()
        mine = t <= at_ms
        t, idx, off = t[mine], idx[mine], off[mine]
        if len(t) == 0:
            return {}
        order = np.lexsort((t, idx))
        t, idx, off = t[order], idx[order], off[order]
        last = np.ones(len(t), dtype=bool)
        last[:-1] = idx[1:] != idx[:-1]
        return {int(i): (int(o), int(ts)) for i, o, ts in zip(idx[last], off[last], t[last], strict=True)}

    def existed(self, at_ms: int) -> bool:
        return any(
            (s is None or s <= at_ms) and (e is None or at_ms < e)
            for s, e in ((sp[0], sp[1]) for sp in self.spans)
        )

    def nbytes(self) -> int:
        """Memory of the points and per-partition arrays (not the shared key tuples)."""
        return (
            len(self.cold)
            + self.hot.buffer_info()[1] * self.hot.itemsize
            + 2 * len(self.last_off) * 8
            + len(self.keys) * 8
            + 100 * len(self.index)  # the dict's slots, roughly
        )

    # -- persistence -------------------------------------------------------------------------------
    def to_row(self, gid: str) -> list[Any]:
        return [
            gid,
            self.kind,
            self.spans,
            [[t, p] for t, p in self.keys],
            self.last_off.tobytes(),
            self.last_ms.tobytes(),
            self.cold,
            self.hot.tobytes(),
            self.thinned_ms,
        ]

    @classmethod
    def from_row(
        cls, row: Sequence[Any], key: Callable[[TopicPartition], TopicPartition]
    ) -> tuple[str, GroupLog]:
        gid, kind, spans, keys, last_off, last_ms, cold, hot, thinned = row
        g = cls()
        g.kind = kind
        g.spans = [list(s) for s in spans]
        g.keys = [key((str(t), int(p))) for t, p in keys]
        g.index = {tp: i for i, tp in enumerate(g.keys)}
        g.last_off = array("q", last_off)
        g.last_ms = array("q", last_ms)
        g.cold = bytes(cold)
        g.hot = array("q", hot)
        g.thinned_ms = int(thinned)
        return str(gid), g


# ----------------------------------------------------------------------------------- answers
@dataclass(frozen=True)
class PartitionAt:
    topic: str
    partition: int
    #: the committed offset in effect at T (None: none)
    offset: int | None
    #: when that offset was committed (its point's time), None: no offset
    committed_ms: int | None
    #: the committed offset now (None: none) and when it was committed
    offset_now: int | None
    committed_now_ms: int | None


@dataclass(frozen=True)
class GroupAt:
    """What the history says of a group at a moment."""

    group_id: str
    at_ms: int
    kind: str | None
    #: the step of the tier ``at_ms`` falls in: the answer is at most this old (0: every point kept)
    resolution_ms: int
    partitions: list[PartitionAt] = field(default_factory=list)


class HistoryError(Exception):
    """A question the history cannot answer: ``status`` (HTTP), ``error`` (a stable code), the
    message, and fields for the JSON body."""

    def __init__(self, status: int, error: str, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message
        self.fields = fields


# ------------------------------------------------------------------------------------ history
class OffsetHistory:
    """Every group's committed offsets over time (see the module doc)."""

    def __init__(
        self,
        tiers: Sequence[Tier],
        horizon_ms: int,
        path: Path | None = None,
        *,
        clock_ms: Callable[[], int] | None = None,
        states: Callable[[], Iterable[tuple[str, bytes]]] | None = None,
        topic_names: Callable[[], Mapping[str, str]] | None = None,
        retention: Any = None,
        save_interval_s: float = 60.0,
    ) -> None:
        self.tiers = [(int(a), int(s)) for a, s in tiers]
        self.horizon_ms = int(horizon_ms)
        self.path = Path(path) if path is not None else None
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        #: every group's state bytes now (the snapshot store's), for `seed`
        self.states = states
        #: topic id -> name (the lag tracker's), for share-partitions keyed by topic id
        self.topic_names = topic_names
        #: the retention counts saved with the history (`streaming.health.retention.RetentionWatch`)
        self.retention = retention
        self.save_interval_s = save_interval_s
        self._lock = threading.RLock()
        self.groups: dict[str, GroupLog] = {}
        #: one tuple per topic-partition, shared by every group's keys
        self._keys: dict[TopicPartition, TopicPartition] = {}
        self.recording_since_ms: int | None = None
        self._seeded = False
        self._journal: Any = None
        self._journal_gen = 0
        #: changes since start (journalled batches, groups settled or dropped) and how many of
        #: them the last snapshot holds, with the retention counts' version it held: a snapshot
        #: that would write what the file already has is not written (a quiet cluster's history
        #: rewrote every group each ``save_interval_s``: ~1 s of a core a minute at 10k x 50)
        self._changes = 1
        self._saved: tuple[int, object] = (0, None)
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        #: the sink's batches not folded yet (rows, time), and the thread's wake-up
        self._pending: list[tuple[list[Any], int]] = []
        self._pending_lock = threading.Lock()
        self._wake = threading.Event()
        #: points appended since start (a figure for the logs and tests)
        self.points_added = 0
        #: ``mirror-offset-history-<cluster>`` when one of several clusters
        self.thread_name = "mirror-offset-history"

    @classmethod
    def from_settings(cls, settings: Settings, **parts: Any) -> OffsetHistory | None:
        """The history the settings ask for (None: ``offset_history_enabled`` off); ``parts``: the
        other arguments (`states`, `topic_names`, `retention`)."""
        if not settings.offset_history_enabled:
            return None
        path = settings.offset_history_dir()
        if path is None:
            log.warning(
                "offset history: the checkpoint %s is not on a local disk, so the history is kept in "
                "memory only (a restart starts it again): set offset_history_path to keep it",
                settings.checkpoint_location,
            )
        tiers = [(int(a * 1000), int(step * 1000)) for a, step in settings.offset_history_tiers]
        return cls(tiers, int(settings.offset_history_horizon_s * 1000), path, **parts)

    def _key(self, tp: TopicPartition) -> TopicPartition:
        return self._keys.setdefault(tp, tp)

    # -- the feed --------------------------------------------------------------------------------
    def on_batch(self, batch_id: int, rows: list[Any]) -> None:
        """The sink's hook (`streaming.pipeline.sinks.MirrorSink.on_batch`): the changed groups'
        offsets as points.  While the history's thread runs the rows are queued for it and the
        sink returns at once -- reading 10k groups' offsets took ~2 s on the sink's path
        (bench/offset_history.py) -- and a question, the upkeep or the stop takes what is queued
        first (`drain`); without the thread they are folded here."""
        with self._pending_lock:
            self._pending.append((rows, self.clock_ms()))
        if self._thread is None:
            self.drain()
        else:
            self._wake.set()

    def drain(self) -> int:
        """Fold the batches the sink queued, oldest first; returns how many."""
        with self._lock:  # one drain at a time: the batches fold in their order
            with self._pending_lock:
                batches, self._pending = self._pending, []
            for rows, now in batches:
                self._feed(rows, now)
        return len(batches)

    def _feed(self, rows: list[Any], now: int) -> None:
        """One batch's rows: each changed group's offsets as points, journalled."""
        deleted_at: dict[str, int] = {}
        for r in rows:
            if r.kind == "event" and r.summary and r.summary.startswith("group_deleted"):
                deleted_at[r.group_id] = _event_time(r.body) or now
        ops: list[list[Any]] = []
        with self._lock:
            if self.recording_since_ms is None:
                self.recording_since_ms = now
            for r in rows:
                if r.kind == "snapshot":
                    summ = _summary(r.summary)
                    if summ.get("exists", True):
                        op = self._op_live(
                            r.group_id, bytes(r.blob), summ.get("kind"), summ.get("last_change_ms"), now
                        )
                    else:
                        op = [r.group_id, None, False, deleted_at.get(r.group_id, now), []]
                elif r.kind == "deleted":
                    op = [r.group_id, None, False, deleted_at.get(r.group_id, now), []]
                else:
                    continue
                if op is not None:
                    self._apply(op)
                    ops.append(op)
            if not self._seeded:
                ops += self._seed_locked(now, {op[0] for op in ops})
            self._journal_write(ops)

    def _op_live(
        self, gid: str, blob: bytes, kind: str | None, changed_ms: int | None, now: int
    ) -> list[Any] | None:
        """A live group's op (under the lock): ``[gid, kind, True, first seen, [[topic, partition,
        time, offset], ...]]`` with a point for every committed offset that changed and -1 for
        every partition the group no longer has an offset on."""
        try:
            found_kind, offsets = committed_offsets(blob)
        except StateCodecError:
            log.warning("offset history: group %r's state bytes do not decode; skipped", gid)
            return None
        kind = kind or found_kind
        g = self.groups.get(gid)
        points = []
        first = now
        if kind != SHARE:  # a share group's points come from its share state (`on_share_state`)
            index = g.index if g is not None else {}
            last = g.last_off if g is not None else None
            for tp, (offset, ts) in offsets.items():
                first = min(first, ts)
                i = index.get(tp)
                if last is None or i is None or last[i] != offset:
                    points.append([tp[0], tp[1], ts, offset])
            if g is not None:
                removed_at = changed_ms if changed_ms is not None else now
                for i, (tp, o) in enumerate(zip(g.keys, g.last_off, strict=True)):
                    if o != NO_OFFSET and tp not in offsets:
                        points.append([tp[0], tp[1], max(removed_at, g.last_ms[i]), NO_OFFSET])
        return [gid, kind, True, first, points]

    def on_share_state(self, rows: Iterable[tuple[str, bytes | None, Any]]) -> None:
        """The share-state store's applied rows (`streaming.serving.share.ShareStateStore`): each
        share-partition's start offset as the share group's committed offset, at the time the
        share coordinator last wrote it."""
        names = self.topic_names() if self.topic_names is not None else {}
        now = self.clock_ms()
        ops = []
        for gid, blob, _ in rows:
            if blob is None:
                continue
            try:
                state = decode_share(blob)
            except ValueError:
                continue
            points = [
                [names.get(tid, tid), p, sp.updated_ms or now, sp.start_offset]
                for (tid, p), sp in state.partitions.items()
                if sp.start_offset is not None
            ]
            ops.append([gid, SHARE, True, now, points])
        if not ops:
            return
        with self._lock:
            if self.recording_since_ms is None:
                self.recording_since_ms = now
            for op in ops:
                self._apply(op)
            self._journal_write(ops)

    def _apply(self, op: Sequence[Any]) -> None:
        gid, kind, live, at, points = op
        g = self.groups.get(gid)
        if not live:
            if g is None or not g.alive:
                return
            for i, last in enumerate(g.last_off):
                if last != NO_OFFSET:
                    g.add(i, max(int(at), g.last_ms[i]), NO_OFFSET)
            g.close(int(at))
            return
        if g is None:
            g = self.groups[gid] = GroupLog()
        if kind is not None:
            g.kind = kind
        g.open(int(at))
        for t, p, ts, offset in points:
            if g.add(g.slot(self._key((t, p))), int(ts), int(offset)):
                self.points_added += 1

    def seed(self) -> None:
        """Compare every group of the store with the history now (`on_batch` does it once)."""
        self.drain()
        with self._lock:
            ops = self._seed_locked(self.clock_ms(), set())
            self._journal_write(ops)

    def _seed_locked(self, now: int, done: set[str]) -> list[list[Any]]:
        self._seeded = True
        if self.states is None:
            return []
        ops: list[list[Any]] = []
        present = set(done)
        for gid, blob in self.states():
            present.add(gid)
            if gid in done:
                continue
            g = self.groups.get(gid)
            op = self._op_live(gid, blob, g.kind if g is not None else None, None, now)
            if op is not None:
                ops.append(op)
        for gid, g in self.groups.items():
            if gid not in present and g.alive:
                ops.append([gid, None, False, now, []])
        for op in ops:
            self._apply(op)
        return ops

    # -- questions ---------------------------------------------------------------------------------
    def horizon_ms_at(self, now_ms: int) -> int:
        """The oldest moment the history answers for."""
        return max(now_ms - self.horizon_ms, self.recording_since_ms or now_ms)

    def resolution_at(self, at_ms: int, now_ms: int) -> int:
        age = now_ms - at_ms
        for limit, step in self.tiers:
            if age < limit:
                return step
        return self.tiers[-1][1] if self.tiers else 0

    def at(self, group_id: str, at_ms: int, now_ms: int | None = None) -> GroupAt:
        """The group's committed offsets in effect at ``at_ms`` and now (`HistoryError` when the
        history cannot say: before its horizon, in the future, a group it does not know or that
        did not exist then)."""
        self.drain()
        now = self.clock_ms() if now_ms is None else now_ms
        if at_ms > now:
            raise HistoryError(400, "at_in_the_future", "at is in the future", now_ms=now)
        with self._lock:
            horizon = self.horizon_ms_at(now)
            if at_ms < horizon:
                since = self.recording_since_ms
                why = (
                    f"the history began recording at {_iso(since)}"
                    if since is not None and since > now - self.horizon_ms
                    else f"the horizon is {self.horizon_ms // 1000} s (offset_history_horizon_s)"
                )
                raise HistoryError(
                    410,
                    "before_horizon",
                    f"at is before the history's horizon {_iso(horizon)}: {why}",
                    horizon_ms=horizon,
                    horizon=_iso(horizon),
                )
            g = self.groups.get(group_id)
            if g is None:
                raise HistoryError(
                    404, "group_not_found", "the history holds no such group", reason="unknown"
                )
            if not g.existed(at_ms):
                first = g.spans[0][0] if g.spans else None
                before = [sp for sp in g.spans if sp[1] is not None and int(sp[1]) <= at_ms]
                if first is not None and at_ms < int(first):
                    reason, message = (
                        "not_created_yet",
                        f"the group was first seen at {_iso(int(first))}, after at",
                    )
                elif before:
                    end = int(before[-1][1])  # type: ignore[arg-type]
                    reason, message = "deleted", f"the group was deleted at {_iso(end)}, before at"
                else:
                    reason, message = "did_not_exist", "the group did not exist at that moment"
                raise HistoryError(404, "group_not_at", message, reason=reason, spans=_spans_json(g.spans))
            then = g.at(at_ms)
            rows = []
            for i, (t, p) in enumerate(g.keys):
                off_then, ms_then = then.get(i, (NO_OFFSET, 0))
                off_now = g.last_off[i]
                if off_then == NO_OFFSET and off_now == NO_OFFSET:
                    continue
                rows.append(
                    PartitionAt(
                        t,
                        p,
                        None if off_then == NO_OFFSET else off_then,
                        None if off_then == NO_OFFSET else ms_then,
                        None if off_now == NO_OFFSET else off_now,
                        None if off_now == NO_OFFSET else g.last_ms[i],
                    )
                )
            rows.sort(key=lambda r: (r.topic, r.partition))
            return GroupAt(group_id, at_ms, g.kind, self.resolution_at(at_ms, now), rows)

    # -- upkeep -----------------------------------------------------------------------------------
    def maintain(self, now_ms: int | None = None) -> int:
        """Pack and thin what is due; drop groups deleted before the horizon.  Returns the groups
        settled."""
        self.drain()
        now = self.clock_ms() if now_ms is None else now_ms
        with self._lock:
            gids = list(self.groups)
        n = 0
        for gid in gids:
            with self._lock:
                g = self.groups.get(gid)
                if g is None:
                    continue
                if not g.alive and g.spans and int(g.spans[-1][1] or now) < now - self.horizon_ms:
                    del self.groups[gid]
                    self._changes += 1
                    continue
                settled = g.settle(now, self.tiers, self.horizon_ms)
                if settled:
                    self._changes += 1
                n += settled
        return n

    def nbytes(self) -> int:
        self.drain()
        with self._lock:
            return sum(g.nbytes() for g in self.groups.values()) + 120 * len(self._keys)

    def point_count(self) -> int:
        self.drain()
        with self._lock:
            return sum(len(unpack(g.cold)[0]) + len(g.hot) // 3 for g in self.groups.values())

    # -- persistence --------------------------------------------------------------------------------
    def load(self) -> int:
        """The snapshot and the journals written after it (a start); returns the groups loaded."""
        if self.path is None:
            return 0
        self.path.mkdir(parents=True, exist_ok=True)
        snap = self.path / SNAPSHOT
        covered = -1
        with self._lock:
            if snap.exists():
                try:
                    doc = msgpack.unpackb(zlib.decompress(snap.read_bytes()), raw=False, strict_map_key=False)
                    if doc.get("format") != FORMAT:
                        raise ValueError(f"format {doc.get('format')}, this code reads {FORMAT}")
                except (ValueError, zlib.error, msgpack.ExtraData, msgpack.FormatError) as exc:
                    bad = snap.with_name(f"{SNAPSHOT}.unreadable-{int(time.time())}")
                    snap.rename(bad)
                    log.error(
                        "offset history: %s does not read (%s); moved to %s, starting empty", snap, exc, bad
                    )
                    doc = None
                if doc is not None:
                    self.recording_since_ms = doc["recording_since_ms"]
                    covered = int(doc["journal"])
                    for row in doc["groups"]:
                        gid, g = GroupLog.from_row(row, self._key)
                        self.groups[gid] = g
                    if self.retention is not None:
                        self.retention.load(doc.get("retention") or [])
            gens = sorted(
                int(p.name[len(JOURNAL) :])
                for p in self.path.glob(f"{JOURNAL}*")
                if p.name[len(JOURNAL) :].isdigit()
            )
            replayed = 0
            for gen in gens:
                if gen <= covered:
                    continue
                replayed += self._replay(self.path / f"{JOURNAL}{gen}")
            self._journal_gen = max([covered, *gens]) + 1
            log.info(
                "offset history: %d groups loaded from %s (%d journalled batches replayed)",
                len(self.groups),
                self.path,
                replayed,
            )
            return len(self.groups)

    def _replay(self, path: Path) -> int:
        n = 0
        with path.open("rb") as f:
            unpacker = msgpack.Unpacker(f, raw=False, strict_map_key=False)
            try:
                for ops in unpacker:
                    for op in ops:
                        if op[0] == SINCE:
                            if self.recording_since_ms is None:
                                self.recording_since_ms = op[1]
                            continue
                        self._apply(op)
                    n += 1
            except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError):
                log.warning(
                    "offset history: %s ends in a partial entry (a crash while writing); read up to it", path
                )
        return n

    def _journal_write(self, ops: list[list[Any]]) -> None:
        if ops:
            self._changes += 1
        if self.path is None or not ops:
            return
        if self._journal is None:
            self.path.mkdir(parents=True, exist_ok=True)
            self._journal = (self.path / f"{JOURNAL}{self._journal_gen}").open("ab")
            # a journal without its snapshot (a crash before the first one) still knows this
            self._journal.write(msgpack.packb([[SINCE, self.recording_since_ms]], use_bin_type=True))
        self._journal.write(msgpack.packb(ops, use_bin_type=True))
        self._journal.flush()  # the process may die after this batch: the OS has it

    def save(self) -> None:
        """A new snapshot (the journals it covers are removed)."""
        self.drain()
        if self.path is None:
            return
        with self._lock:
            changes = self._changes
            counts = getattr(self.retention, "version", None)
            if self._saved == (changes, counts):
                return
            gen = self._journal_gen
            if self._journal is not None:
                self._journal.close()
                self._journal = None
            self._journal_gen += 1
            doc = {
                "format": FORMAT,
                "recording_since_ms": self.recording_since_ms,
                "journal": gen,
                "groups": [g.to_row(gid) for gid, g in self.groups.items()],
                "retention": self.retention.to_json() if self.retention is not None else [],
            }
        data = zlib.compress(msgpack.packb(doc, use_bin_type=True), 1)
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = self.path / f".{SNAPSHOT}.tmp"
        with tmp.open("wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(self.path / SNAPSHOT)
        self._saved = (changes, counts)
        for p in self.path.glob(f"{JOURNAL}*"):
            suffix = p.name[len(JOURNAL) :]
            if suffix.isdigit() and int(suffix) <= gen:
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()

    def snapshot_bytes(self) -> int:
        """The size of the files the history persists now."""
        if self.path is None or not self.path.exists():
            return 0
        return sum(p.stat().st_size for p in self.path.iterdir() if p.is_file())

    # -- the thread ------------------------------------------------------------------------------------
    def start(self) -> OffsetHistory:
        """Load, then upkeep and snapshots every ``save_interval_s`` in a thread of its own (again
        after a `stop`: a cluster's parts are rebuilt and restarted after a start that failed)."""
        self._stopped.clear()
        self.load()
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        """Fold what the sink queued as it comes; upkeep and a snapshot every ``save_interval_s``."""
        next_save = time.monotonic() + self.save_interval_s
        while not self._stopped.is_set():
            self._wake.wait(max(0.0, next_save - time.monotonic()))
            self._wake.clear()
            try:
                self.drain()
                if time.monotonic() >= next_save:
                    next_save = time.monotonic() + self.save_interval_s
                    self.maintain()
                    self.save()
            except Exception:  # the next round tries again; the journal keeps every batch meanwhile
                log.warning("offset history upkeep failed", exc_info=True)

    def stop(self) -> None:
        self._stopped.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(30)
            self._thread = None
        try:
            self.maintain()
            self.save()
        except Exception:
            log.warning(
                "offset history: the last snapshot failed (the journal has every batch)", exc_info=True
            )
        with self._lock:
            if self._journal is not None:
                self._journal.close()
                self._journal = None


# ----------------------------------------------------------------------------------------- helpers
def _summary(text: str | None) -> dict[str, Any]:
    import json

    try:
        out = json.loads(text) if text else {}
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {}


def _event_time(body: str | None) -> int | None:
    e = _summary(body)
    t = e.get("source_timestamp_ms") or e.get("at_ms")
    return int(t) if isinstance(t, int) else None


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _spans_json(spans: list[list[int | None]]) -> list[dict[str, Any]]:
    return [{"from_ms": s, "from": _iso(s), "until_ms": e, "until": _iso(e)} for s, e in spans]
