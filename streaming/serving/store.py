"""The driver's view of the mirror: the latest snapshot of every group, readiness, and recent errors.

Written by the query's ``foreachBatch`` sink (one writer), read by the HTTP API and the metrics
collector (many readers).  Snapshot application is idempotent per batch id: replaying a batch
after a restart rewrites the same snapshots.

A group arrives either as its snapshot (a JSON-able dict) or -- what the query sends -- as its
state bytes (`state.codec`, ~0.8 KB for 50 offsets) with its small ``GET /groups`` summary.  The
full snapshot (~14 KB of JSON for 50 offsets) is rendered from the bytes when somebody reads it
(``GET /groups/{id}``, a metrics scrape) and cached until the group changes: a group that changes
in every micro-batch is rendered at most once per read, not once per batch, and rendering leaves
the executors' per-group budget.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: a group as applied to the store: its snapshot dict, or its state bytes to render on read
Snapshot = dict[str, Any]
Renderer = Callable[[bytes], Snapshot]


@dataclass
class BatchStats:
    batch_id: int = -1
    input_rows: int = 0
    output_rows: int = 0
    duration_ms: int = 0
    finished_at_ms: int = 0
    # where a batch's time went: running the query's stages and bringing the rows to the driver
    # (compute_ms), applying them to the store (apply_ms), writing the output topics (write_ms)
    compute_ms: int = 0
    apply_ms: int = 0
    write_ms: int = 0


@dataclass
class Readiness:
    """Whether the mirror has caught up with the end of `__consumer_offsets` seen at start.

    ``targets`` are the end offsets (last stable offsets under read_committed) per partition when
    the mirror started; ``positions`` the next offset the query will read per partition.  A
    partition whose end is a transaction marker or a compacted gap still reaches its target,
    because both sides count log positions, not records.
    """

    targets: dict[int, int] = field(default_factory=dict)
    starts: dict[int, int] = field(default_factory=dict)
    positions: dict[int, int] = field(default_factory=dict)
    latest: dict[int, int] = field(default_factory=dict)
    ready: bool = False
    ready_at_ms: int | None = None
    #: for sources without offsets (capture replay): ready once the input ran dry after data
    drained: bool = False

    def update(self, positions: Mapping[int, int], latest: Mapping[int, int] | None = None) -> None:
        self.positions.update(positions)
        if latest:
            self.latest.update(latest)
        if (
            not self.ready
            and self.targets
            and all(self.positions.get(p, self.starts.get(p, 0)) >= end for p, end in self.targets.items())
        ):
            self.mark_ready()

    def mark_ready(self) -> None:
        if not self.ready:
            self.ready = True
            self.ready_at_ms = int(time.time() * 1000)

    def behind(self) -> dict[int, int]:
        """Records (log positions) between where the query is and the end, per partition."""
        ends = self.latest or self.targets
        return {p: max(0, end - self.positions.get(p, self.starts.get(p, 0))) for p, end in ends.items()}

    def progress(self) -> float:
        """Fraction of the start-time backlog consumed (1.0 when ready)."""
        if self.ready:
            return 1.0
        total = sum(max(0, end - self.starts.get(p, 0)) for p, end in self.targets.items())
        if total == 0:
            return 0.0 if not self.targets else 1.0
        done = sum(
            max(0, min(self.positions.get(p, self.starts.get(p, 0)), end) - self.starts.get(p, 0))
            for p, end in self.targets.items()
        )
        return done / total

    def to_json(self) -> dict[str, Any]:
        behind = self.behind()
        return {
            "ready": self.ready,
            "ready_at_ms": self.ready_at_ms,
            "progress": round(self.progress(), 4),
            "records_behind": sum(behind.values()),
            "partitions": {
                str(p): {
                    "position": self.positions.get(p, self.starts.get(p, 0)),
                    "target": self.targets.get(p),
                    "latest": self.latest.get(p),
                    "behind": behind.get(p, 0),
                }
                for p in sorted(set(self.targets) | set(self.positions))
            },
        }


@dataclass
class MirrorStatus:
    """What the driver's supervisor knows about the source and the query (metrics, /ready)."""

    #: why the mirror is not mirroring right now (None: it is), e.g. "waiting for __consumer_offsets"
    waiting_reason: str | None = None
    source_up: bool = True
    source_error: str | None = None
    query_restarts: int = 0
    #: side -> group ids that disagreed for two reconciliation rounds in a row
    mismatches: dict[str, set[str]] = field(default_factory=dict)
    reconcile_rounds: dict[str, int] = field(default_factory=dict)
    reconciled_at_ms: int | None = None
    #: the mirror was down longer than delete.retention.ms: reconcile as soon as it caught up
    possible_missed_tombstones: bool = False


class SnapshotStore:
    """Thread-safe map group id -> latest snapshot, plus mirror-wide status.

    ``renderer`` turns a group's state bytes into its snapshot (`streaming.serving.render.snapshot_renderer`);
    it is needed only when bytes are applied."""

    def __init__(self, max_errors: int = 1000, renderer: Renderer | None = None) -> None:
        self._lock = threading.RLock()
        #: group id -> snapshot dict, or state bytes not rendered yet
        self._groups: dict[str, Snapshot | bytes] = {}
        self._summaries: dict[str, dict[str, Any]] = {}
        self.renderer = renderer
        self.readiness = Readiness()
        self.status = MirrorStatus()
        self.last_batch = BatchStats()
        #: recent undecodable / unknown records with their partition and offset (newest last)
        self.errors: deque[dict[str, Any]] = deque(maxlen=max_errors)
        self.counters: dict[str, int] = {}
        #: mirror-lifetime counts by key tuple, for the metrics: ("event", type),
        #: ("offsets_expired", origin), ("group_deleted", reason), ("skipped", status, type, reason)
        self.tallies: dict[tuple[str, ...], int] = {}
        self.failure: str | None = None
        self.applied_batch_id = -1
        #: quarantined groups (`streaming.pipeline.adapter`): group id -> why (exception, record)
        self.quarantined: dict[str, dict[str, Any]] = {}
        #: groups the coordinator no longer lists (reconciliation): group id -> reason
        self.gone: dict[str, dict[str, Any]] = {}

    # -- writes (the foreachBatch thread) ------------------------------------------------------
    def apply(
        self,
        batch_id: int,
        snapshots: Iterable[tuple[str, Snapshot | bytes | None, dict[str, Any] | None]],
    ) -> None:
        """``snapshots``: (group id, snapshot or state bytes -- None if the group was deleted --,
        summary).  A summary is required with state bytes."""
        with self._lock:
            for group_id, snapshot, summary in snapshots:
                # a fold that succeeded: the group left quarantine; a new record: it exists again
                self.quarantined.pop(group_id, None)
                self.gone.pop(group_id, None)
                if snapshot is None:
                    self._groups.pop(group_id, None)
                    self._summaries.pop(group_id, None)
                    continue
                if isinstance(snapshot, bytes):
                    if summary is None or self.renderer is None:
                        raise ValueError(f"group {group_id!r}: state bytes need a summary and a renderer")
                    self._summaries[group_id] = summary
                else:
                    self._summaries[group_id] = summary if summary is not None else snapshot
                self._groups[group_id] = snapshot
            self.applied_batch_id = max(self.applied_batch_id, batch_id)

    def load(self, snapshots: Iterable[tuple[str, Snapshot | bytes, dict[str, Any]]]) -> int:
        """Bulk-load groups recovered from the checkpointed state at start."""
        n = 0
        with self._lock:
            for group_id, snapshot, summary in snapshots:
                self._groups[group_id] = snapshot
                self._summaries[group_id] = summary
                n += 1
        return n

    def quarantine(self, infos: Iterable[dict[str, Any]]) -> None:
        """Groups whose fold failed in this batch (they keep their last snapshot)."""
        with self._lock:
            for info in infos:
                gid = str(info["group_id"])
                first = self.quarantined.get(gid, {}).get("since_ms", info.get("at_ms"))
                self.quarantined[gid] = {**info, "since_ms": first}

    def mark_gone(self, group_id: str, reason: dict[str, Any]) -> bool:
        """The coordinator no longer has a group the mirror holds: ``exists: false`` with the reason
        until a record for it arrives.  False if the mirror does not hold it (any more)."""
        with self._lock:
            if group_id not in self._groups:
                return False
            self.gone[group_id] = reason
            return True

    def group_ids(self) -> set[str]:
        with self._lock:
            return set(self._groups)

    def add_errors(self, errors: Iterable[dict[str, Any]]) -> None:
        with self._lock:
            self.errors.extend(errors)

    def count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.counters[name] = self.counters.get(name, 0) + n

    def add_tallies(self, counts: Mapping[tuple[str, ...], int]) -> None:
        with self._lock:
            for key, n in counts.items():
                self.tallies[key] = self.tallies.get(key, 0) + n

    # -- reads (HTTP, metrics) -----------------------------------------------------------------
    def _rendered(self, pending: Mapping[str, bytes]) -> dict[str, Snapshot]:
        """Render state bytes outside the lock (the sink keeps applying meanwhile), then cache
        each snapshot unless the group changed again in between."""
        if not pending:
            return {}
        assert self.renderer is not None  # apply() refuses bytes without one
        done = {gid: self.renderer(blob) for gid, blob in pending.items()}
        with self._lock:
            for gid, snap in done.items():
                if self._groups.get(gid) is pending[gid]:
                    self._groups[gid] = snap
        return done

    def group(self, group_id: str) -> Snapshot | None:
        with self._lock:
            found = self._groups.get(group_id)
            quarantine = self.quarantined.get(group_id)
            gone = self.gone.get(group_id)
        if isinstance(found, bytes):
            found = self._rendered({group_id: found})[group_id]
        if quarantine is None and gone is None:
            return found
        out: dict[str, Any] = dict(found) if found is not None else {"group_id": group_id, "exists": None}
        if quarantine is not None:
            out["quarantine"] = quarantine
        if gone is not None:
            out["exists"] = False
            out["exists_reason"] = gone
        return out

    def tallies_snapshot(self) -> dict[tuple[str, ...], int]:
        with self._lock:
            return dict(self.tallies)

    def summaries(self) -> list[dict[str, Any]]:
        with self._lock:
            out = [self._summaries[g] for g in sorted(self._summaries)]
            if self.quarantined or self.gone:
                out = [self._flagged(s) for s in out]
            return out

    def _flagged(self, summary: dict[str, Any]) -> dict[str, Any]:
        gid = summary.get("group_id")
        if gid not in self.quarantined and gid not in self.gone:
            return summary
        out = dict(summary)
        if gid in self.quarantined:
            out["quarantined"] = True
        if gid in self.gone:
            out["exists"] = False
        return out

    def snapshots(self) -> list[Snapshot]:
        """Every group's snapshot (rendering the ones that changed since they were last read)."""
        with self._lock:
            current = dict(self._groups)
        pending = {gid: v for gid, v in current.items() if isinstance(v, bytes)}
        rendered = self._rendered(pending)
        return [v if isinstance(v, dict) else rendered[gid] for gid, v in current.items()]

    def __len__(self) -> int:
        with self._lock:
            return len(self._groups)
