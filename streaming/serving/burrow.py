"""Burrow-compatible consumer health: a sliding window of commits per partition, Burrow's
evaluation rules, its HTTP paths and JSON shapes.

The rules are linkedin/Burrow's (``core/internal/evaluator/caching.go``, ``calculatePartitionStatus``
and Rules 1-5), as small pure functions over a partition's window of commits, each
``(offset, timestamp_ms, lag | None)`` -- the lag being the messages behind the log end known when
the commit was recorded, as Burrow's storage computes it.  The window (`CommitHistory`) keeps the
last ``intervals`` commits per partition (Burrow's storage setting of that name, default 10); a
commit less than ``min_distance_s`` after the previous one replaces it (Burrow's ``min-distance``).

Where the mirror differs from Burrow (README "Consumer health"):

* commits reach the window once per micro-batch (the newest commit of each partition in the
  batch, as the fold leaves it): with the default 5 s trigger that is Burrow with a min-distance
  of the trigger interval;
* a group deleted in the log (tombstone, DeleteGroups, all offsets expired) and an offset deleted
  or expired leave the window at once -- Burrow keeps them until ``expire-group``;
* owners (``owner``, ``client_id``) come from the group's assignment in the log, for every kind of
  group (KIP-848 included), with topic ids resolved to names;
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
from typing import Any, Final
from urllib.parse import unquote

from streaming.serving.lag import GroupOffsets, LagTracker, PartitionLag, lag_json

# Burrow's StatusConstant (core/protocol/evaluator.go): ordered from good to bad
NOTFOUND: Final = 0
OK: Final = 1
WARN: Final = 2
ERR: Final = 3
STOP: Final = 4
STALL: Final = 5
REWIND: Final = 6
STATUS_NAMES: Final = ("NOTFOUND", "OK", "WARN", "ERR", "STOP", "STALL", "REWIND")

#: (offset, commit timestamp ms, lag at commit or None)
Commit = tuple[int, int, int | None]


# ------------------------------------------------------------------------------------- rules
def rule1_lag_ever_zero(commits: Sequence[Commit]) -> bool:
    """Rule 1 -- if the lag was zero at any commit of the window, the window is OK."""
    return any(lag == 0 for _, _, lag in commits)


def rule2_rewind(commits: Sequence[Commit]) -> bool:
    """Rule 2 -- a committed offset lower than the one before it: REWIND."""
    return any(commits[i][0] < commits[i - 1][0] for i in range(1, len(commits)))


def rule3_stopped(commits: Sequence[Commit], now_ms: int) -> bool:
    """Rule 3 -- the time since the newest commit is longer than the window's span (newest minus
    oldest commit time): the consumer stopped committing (STOP)."""
    first, last = commits[0][1], commits[-1][1]
    return (now_ms - last) > (last - first)


def rule4_stalled(commits: Sequence[Commit]) -> bool:
    """Rule 4 -- commits that never change the offset, with lag (Rule 1 ruled zero lag out): STALL."""
    return all(commits[i][0] == commits[i - 1][0] for i in range(1, len(commits)))


def rule5_lag_not_decreasing(commits: Sequence[Commit]) -> bool:
    """Rule 5 -- offsets advance but the lag never decreases between known lags: WARN (slow)."""
    last: int | None = None
    for _, _, lag in commits:
        if lag is not None:
            if last is not None and lag < last:
                return False
            last = lag
    return True


def recent_lag_zero(commits: Sequence[Commit], recent_ends: Iterable[int]) -> bool:
    """Burrow's ``checkIfRecentLagZero``: some recently sampled log end was at or below the newest
    committed offset -- the consumer was caught up minutes ago, so not STOP yet."""
    newest = commits[-1][0]
    return any(end <= newest for end in recent_ends)


def partition_status(
    commits: Sequence[Commit], current_lag: int, recent_ends: Iterable[int], now_ms: int
) -> int:
    """Burrow's ``calculatePartitionStatus``: never an error without current lag; STOP (Rule 3)
    unless recently caught up, then -- only if the lag was never zero (Rule 1) -- REWIND (Rule 2),
    STALL (Rule 4), WARN (Rule 5), in that order; else OK."""
    if not commits or current_lag <= 0:
        return OK
    if rule3_stopped(commits, now_ms) and not recent_lag_zero(commits, recent_ends):
        return STOP
    if not rule1_lag_ever_zero(commits):
        if rule2_rewind(commits):
            return REWIND
        if rule4_stalled(commits):
            return STALL
        if rule5_lag_not_decreasing(commits):
            return WARN
    return OK


def group_status(partition_statuses: Iterable[int]) -> int:
    """The worst partition status, STOP/STALL/REWIND reported as ERR for the group (Burrow's)."""
    worst = OK
    for s in partition_statuses:
        worst = max(worst, s)
    return ERR if worst > ERR else worst


# ------------------------------------------------------------------------------ the window
class CommitHistory:
    """Per group and partition, the last ``intervals`` commits, as flat ``array('q')``s
    (offset, timestamp, lag or -1): 24 bytes a commit."""

    def __init__(self, intervals: int = 10, min_distance_s: float = 1.0) -> None:
        self.intervals = intervals
        self.min_distance_ms = int(min_distance_s * 1000)
        self._lock = threading.Lock()
        self._groups: dict[str, dict[tuple[str, int], array[int]]] = {}
        #: groups recorded (changed or deleted) since `take_dirty`
        self._dirty: set[str] = set()

    def record(self, changed: Iterable[tuple[str, GroupOffsets | None]], tracker: LagTracker) -> None:
        """The groups the sink applied: a commit newer than the window's newest is appended, with
        its lag against the latest sampled end (unknown until the first round: None)."""
        r = tracker.round
        parts = r.partitions if r is not None else {}
        width = 3 * self.intervals
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
                    elif a[-3] == offset and a[-2] == ts:
                        new[tp] = a
                        continue
                    ends = parts.get(tp)
                    lag = -1 if ends is None else max(0, tracker.end_of(ends) - offset)
                    if len(a) and 0 <= ts - a[-2] < self.min_distance_ms:
                        a[-3], a[-1] = offset, lag  # Burrow's min-distance: replace, keep its time
                    else:
                        a.extend((offset, ts, lag))
                        if len(a) > width:
                            del a[:3]
                    new[tp] = a
                self._groups[gid] = new

    def window(self, group_id: str) -> dict[tuple[str, int], list[Commit]] | None:
        with self._lock:
            g = self._groups.get(group_id)
            if g is None:
                return None
            items = [(tp, a.tolist()) for tp, a in g.items()]
        return {
            tp: [(v[i], v[i + 1], None if v[i + 2] < 0 else v[i + 2]) for i in range(0, len(v), 3)]
            for tp, v in items
        }

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

    def memory_entries(self) -> int:
        with self._lock:
            return sum(len(a) // 3 for g in self._groups.values() for a in g.values())


# ------------------------------------------------------------------------------ evaluation
@dataclass(frozen=True)
class PartitionStatus:
    topic: str
    partition: int
    owner: str
    client_id: str
    status: int
    commits: list[Commit]
    current_lag: int
    complete: float


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
    window: Mapping[tuple[str, int], list[Commit]],
    lag_rows: Iterable[PartitionLag],
    tracker: LagTracker,
    *,
    intervals: int,
    now_ms: int,
) -> GroupStatus:
    """Burrow's ``evaluateConsumerStatus`` over the mirror's window and current lag."""
    parts: list[PartitionStatus] = []
    for row in lag_rows:
        commits = window.get((row.topic, row.partition), [])
        if row.committed is None and not commits:
            continue  # assigned, never committed: Burrow has no entry either
        current = 0 if row.lag != row.lag else int(row.lag)  # NaN (end unknown) -> 0, as Burrow's
        table = tracker.tables.get((row.topic, row.partition))
        # the last `intervals` sampled ends: a slice of the table's flat (offset, time) array
        recent = table.points[-2 * intervals :: 2] if table is not None else ()
        status = partition_status(commits, current, recent, now_ms)
        complete = min(1.0, len(commits) / intervals) if intervals else 1.0
        parts.append(
            PartitionStatus(
                row.topic,
                row.partition,
                row.owner.member_host if row.owner.member_host != "unknown" else "",
                row.owner.client_id if row.owner.client_id != "unknown" else "",
                status,
                commits,
                current,
                complete,
            )
        )
    status = group_status(p.status for p in parts)
    maxlag = max(parts, key=lambda p: p.current_lag, default=None)
    complete = sum(1 for p in parts if p.complete == 1.0) / len(parts) if parts else 0.0
    return GroupStatus(group_id, status, parts, complete, sum(p.current_lag for p in parts), maxlag)


_NEVER: Final = 2**63 - 1


def _rule3_at(gs: GroupStatus, now_ms: int) -> int:
    """The earliest time after which Rule 3 (stopped) turns true for a partition of the group
    with current lag that is not STOP yet (its window unchanged): ``now > 2 * newest - oldest``."""
    at = _NEVER
    for p in gs.partitions:
        if p.current_lag > 0 and p.commits and p.status != STOP:
            flip = 2 * p.commits[-1][1] - p.commits[0][1]
            if flip >= now_ms:
                at = min(at, flip)
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
                            offset=p.commits[-1][0] if p.commits else None,
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
    return None if c is None else {"offset": c[0], "timestamp": c[1], "lag": c[2]}


def _partition_status_json(p: PartitionStatus) -> dict[str, Any]:
    return {
        "topic": p.topic,
        "partition": p.partition,
        "owner": p.owner,
        "client_id": p.client_id,
        "status": STATUS_NAMES[p.status],
        "start": _offset_json(p.commits[0]) if p.commits else None,
        "end": _offset_json(p.commits[-1]) if p.commits else None,
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
        self.history = CommitHistory(intervals, min_distance_s)
        self.watcher = StatusWatcher()
        self.host = socket.gethostname()
        #: group -> re-evaluate once the time passes this (Rule 3 turns true), for the groups whose
        #: inputs did not change
        self._recheck: dict[str, int] = {}
        self._last_now: int | None = None
        self.last_evaluated = 0  # groups evaluated by the last `evaluate_all`

    def status(self, group_id: str, now_ms: int) -> GroupStatus | None:
        window = self.history.window(group_id)
        rows = self.tracker.group_lag(group_id)
        if window is None or rows is None:
            return None
        return evaluate(group_id, window, rows, self.tracker, intervals=self.intervals, now_ms=now_ms)

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
        * one of its window's partitions changed end offset or sampled ends (current lag, Rule 3's
          "recently caught up"), or left the round;
        * the time passed the moment Rule 3 turns true for one of its partitions with lag that is
          not STOP yet: newest commit + (newest - oldest commit time);
        * topic names changed, the clock went back, or it is the first evaluation: every group.

        ``pause``: called after every `PACE_GROUPS` groups with the thread CPU seconds they took
        (the driver sleeps there, so that a round over many changed groups does not take a whole
        core from the micro-batches in one go)."""
        changed, everything = self.tracker.take_changes()
        dirty = self.history.take_dirty()
        last, self._last_now = self._last_now, now_ms
        if full or everything or last is None or now_ms < last:
            todo = self.history.groups()
            removed: list[str] | None = None
        else:
            due = {gid for gid, at in self._recheck.items() if now_ms > at}
            todo = sorted(dirty | due | self.history.touching(changed))
            removed = []
        statuses: list[GroupStatus] = []
        busy_from = time.thread_time()
        for i, gid in enumerate(todo):
            if pause is not None and i and i % PACE_GROUPS == 0:
                pause(time.thread_time() - busy_from)
                busy_from = time.thread_time()
            gs = self.status(gid, now_ms)
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
                commits = window.get((t, p), [])
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
