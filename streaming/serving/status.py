"""What the mirror knows about itself, as opposed to the groups it mirrors: readiness, the source,
the query and its restarts, the last batch, reconciliation and drift, the mirror-level tallies, and
the health of its supervised parts (the share-state query).

One object with one lock, handed to each writer -- the supervisor, the source check, the sink, the
progress follower, the reconciler, the drift report, the lag loop, the share-state query -- and read
by ``/ready``, ``/healthz`` and ``/metrics``.  Every write is a method; every read of more than one
field, or of a collection, returns a copy taken under the lock (`MirrorStatus.view`,
`MirrorStatus.readiness_json`), so a reader never iterates a dict another thread is growing and
never sees half of a change (the positions of one progress update, the targets of a start).

The groups themselves, their rendered snapshots and their quarantine live in
`streaming.serving.store.SnapshotStore`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class BatchStats:
    """The last micro-batch the sink completed."""

    batch_id: int = -1
    output_rows: int = 0
    duration_ms: int = 0
    finished_at_ms: int = 0
    # where a batch's time went: running the query's stages and bringing the rows to the driver
    # (compute_ms), applying them to the store (apply_ms), writing the output topics (write_ms)
    compute_ms: int = 0
    apply_ms: int = 0
    write_ms: int = 0
    #: the batch's own timestamp (Spark's processing time for it: the timeouts due before it fired
    #: in it); None when it could not be read
    timestamp_ms: int | None = None


@dataclass
class Readiness:
    """Whether the mirror has caught up with the end of `__consumer_offsets` seen at start.

    ``targets`` are the end offsets (last stable offsets under read_committed) per partition when
    the mirror started; ``positions`` the next offset the query will read per partition.  A
    partition whose end is a transaction marker or a compacted gap still reaches its target,
    because both sides count log positions, not records.

    Not thread-safe by itself: `MirrorStatus` holds one and changes it under its lock.
    """

    targets: dict[int, int] = field(default_factory=dict)
    starts: dict[int, int] = field(default_factory=dict)
    positions: dict[int, int] = field(default_factory=dict)
    latest: dict[int, int] = field(default_factory=dict)
    ready: bool = False
    ready_at_ms: int | None = None

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


@dataclass(frozen=True)
class PartHealth:
    """A supervised part's health beside the main query (today: the share-state query): reported
    in ``/ready``'s JSON and the metrics, never gating readiness."""

    #: "off" (not configured), "waiting" (nothing to read yet, or the mirror is catching up),
    #: "running", "restarting" (failed; restarted after the backoff), "failed" (a cause no restart
    #: fixes; tried again every backoff_max_s), "not_authorized" (an ACL is missing; tried again
    #: every backoff_max_s), "stopped"
    state: str = "off"
    restarts: int = 0
    failures: int = 0
    #: the last failure, in one line (None once running again)
    failure: str | None = None
    #: why it waits (e.g. the topic does not exist yet), or what a failure no restart fixes says
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "restarts": self.restarts,
            "failures": self.failures,
            "failure": self.failure,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class StatusView:
    """A consistent copy of everything `MirrorStatus` holds but the readiness details."""

    ready: bool
    progress: float
    behind: dict[int, int]
    waiting_reason: str | None
    source_up: bool
    source_error: str | None
    #: the source answers again after an outage and the query has shown no progress since
    resuming: bool
    query_restarts: int
    failure: str | None
    mismatches: dict[str, frozenset[str]]
    reconcile_rounds: dict[str, int]
    reconciled_at_ms: int | None
    drift_suspected: dict[str, int]
    last_batch: BatchStats
    parts: dict[str, PartHealth]
    #: `MirrorStatus.last_trigger_ms`
    last_trigger_ms: int = 0


class MirrorStatus:
    """The mirror's own status: one lock, a method per change, copies for readers."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._readiness = Readiness()
        self._waiting_reason: str | None = None
        self._source_up = True
        self._source_error: str | None = None
        #: the source answered again after an outage, and no progress of the query came since: a
        #: query blocked in its offset fetch through the outage is not mirroring yet (`advance`
        #: clears it -- every progress of the query, an idle trigger's included, passes there)
        self._resuming = False
        self._query_restarts = 0
        self._failure: str | None = None
        #: side -> group ids that disagreed for two reconciliation rounds in a row
        self._mismatches: dict[str, frozenset[str]] = {}
        self._reconcile_rounds: dict[str, int] = {}
        self._reconciled_at_ms: int | None = None
        #: the mirror was down longer than delete.retention.ms: reconcile as soon as it caught up
        self._missed_tombstones = False
        #: reason ("log_start", "downtime") -> times drift was suspected at start
        self._drift_suspected: dict[str, int] = {}
        self._last_batch = BatchStats()
        #: when the query last looked for new records (a micro-batch, or a trigger that found none
        #: -- Spark reports one of those every 10 s), epoch ms; 0: not yet
        self._last_trigger_ms = 0
        #: mirror-lifetime counts by key tuple, for the metrics: ("event", type),
        #: ("offsets_expired", origin), ("group_deleted", reason), ("skipped", status, type, reason)
        self._tallies: dict[tuple[str, ...], int] = {}
        #: the newest batch id whose rows were counted (tallies, errors): a batch the query runs
        #: again after a restart from the checkpoint is applied again but not counted twice
        self._counted_batch = -1
        self._parts: dict[str, PartHealth] = {}

    # -- readiness (the start's targets, the progress follower's positions) ---------------------
    def set_targets(self, starts: Mapping[int, int], ends: Mapping[int, int]) -> None:
        """The catch-up targets of a start: ready at once when there is nothing to read."""
        with self._lock:
            r = self._readiness
            r.starts, r.targets, r.latest = dict(starts), dict(ends), dict(ends)
            if all(ends[p] <= starts.get(p, 0) for p in ends):
                r.mark_ready()

    def seeded(self, ends: Mapping[int, int]) -> None:
        """The driver's backfill reached ``ends``: they are the targets where lower, and positions."""
        with self._lock:
            r = self._readiness
            r.targets = {p: min(end, ends.get(p, end)) for p, end in r.targets.items()}
            r.update(ends)

    def advance(self, positions: Mapping[int, int], latest: Mapping[int, int] | None = None) -> None:
        """The query's positions (and the topic's latest ends) after a batch."""
        with self._lock:
            self._readiness.update(positions, latest)
            self._resuming = False

    def mark_ready(self) -> None:
        with self._lock:
            self._readiness.mark_ready()

    @property
    def ready(self) -> bool:
        return self._readiness.ready

    @property
    def ready_at_ms(self) -> int | None:
        return self._readiness.ready_at_ms

    def targets(self) -> dict[int, int]:
        with self._lock:
            return dict(self._readiness.targets)

    def starts(self) -> dict[int, int]:
        with self._lock:
            return dict(self._readiness.starts)

    def positions(self) -> dict[int, int]:
        with self._lock:
            return dict(self._readiness.positions)

    def readiness_json(self) -> dict[str, Any]:
        with self._lock:
            return self._readiness.to_json()

    # -- the source and the query ---------------------------------------------------------------
    def waiting(self, reason: str | None) -> None:
        """Why the mirror is not mirroring right now (None: it is), e.g. "waiting for <topic>"."""
        with self._lock:
            self._waiting_reason = reason

    @property
    def waiting_reason(self) -> str | None:
        return self._waiting_reason

    def source_checked(self, error: str | None) -> bool | None:
        """A check of the source: None when it answered, else what failed.  Returns the change:
        True (it answers again), False (it stopped answering), None (no change)."""
        with self._lock:
            was = self._source_up
            self._source_up, self._source_error = error is None, error
            if was == self._source_up:
                return None
            self._resuming = self._source_up
            return self._source_up

    @property
    def source_up(self) -> bool:
        return self._source_up

    def query_failed(self, description: str) -> None:
        with self._lock:
            self._failure = description

    def query_restarted(self) -> None:
        with self._lock:
            self._query_restarts += 1
            self._failure = None

    @property
    def failure(self) -> str | None:
        return self._failure

    @property
    def query_restarts(self) -> int:
        return self._query_restarts

    # -- reconciliation and drift ---------------------------------------------------------------
    def reconciled(self, outcome: str, mismatches: Mapping[str, set[str]] | None, at_ms: int | None) -> None:
        """A reconciliation round's outcome ("ok", "error", "not_authorized"); with "ok" the
        confirmed mismatches per side and the time."""
        with self._lock:
            self._reconcile_rounds[outcome] = self._reconcile_rounds.get(outcome, 0) + 1
            if mismatches is not None:
                self._mismatches = {side: frozenset(ids) for side, ids in mismatches.items()}
            if at_ms is not None:
                self._reconciled_at_ms = at_ms

    def mismatches(self) -> dict[str, frozenset[str]]:
        with self._lock:
            return dict(self._mismatches)

    def reconcile_rounds(self, outcome: str) -> int:
        with self._lock:
            return self._reconcile_rounds.get(outcome, 0)

    def drift(self, reason: str) -> None:
        """Drift suspected at start for ``reason``; tombstones may have been missed: reconcile
        once caught up."""
        with self._lock:
            self._drift_suspected[reason] = self._drift_suspected.get(reason, 0) + 1
            self._missed_tombstones = True

    def drift_suspected(self, reason: str) -> int:
        with self._lock:
            return self._drift_suspected.get(reason, 0)

    def take_missed_tombstones(self) -> bool:
        """Whether a reconciliation is due for missed tombstones (cleared by asking)."""
        with self._lock:
            due, self._missed_tombstones = self._missed_tombstones, False
            return due

    @property
    def missed_tombstones(self) -> bool:
        return self._missed_tombstones

    # -- batches and tallies (the sink, the lag loop, the driver's events) -----------------------
    def batch_done(self, stats: BatchStats) -> None:
        with self._lock:
            self._last_batch = stats

    @property
    def last_batch(self) -> BatchStats:
        return self._last_batch

    def triggered(self, at_ms: int) -> None:
        """The query reported a trigger (its progress), with or without a micro-batch."""
        with self._lock:
            self._last_trigger_ms = max(self._last_trigger_ms, at_ms)

    @property
    def last_trigger_ms(self) -> int:
        return self._last_trigger_ms

    def count_batch(self, batch_id: int, *, force: bool = False) -> bool:
        """Whether batch ``batch_id``'s tallies and errors are to be counted now: not when this
        batch or a later one was counted already (a batch run again after a restart), unless
        ``force``.  Counts it as done."""
        with self._lock:
            fresh = force or batch_id > self._counted_batch
            self._counted_batch = max(self._counted_batch, batch_id)
            return fresh

    @property
    def counted_batch(self) -> int:
        return self._counted_batch

    def add_tallies(self, counts: Mapping[tuple[str, ...], int]) -> None:
        with self._lock:
            for key, n in counts.items():
                self._tallies[key] = self._tallies.get(key, 0) + n

    def tallies(self) -> dict[tuple[str, ...], int]:
        with self._lock:
            return dict(self._tallies)

    # -- supervised parts beside the main query --------------------------------------------------
    def part(self, name: str, **change: Any) -> PartHealth:
        """Change part ``name``'s health (fields of `PartHealth`); its new health."""
        with self._lock:
            health = replace(self._parts.get(name, PartHealth()), **change)
            self._parts[name] = health
            return health

    def part_health(self, name: str) -> PartHealth:
        with self._lock:
            return self._parts.get(name, PartHealth())

    def parts(self) -> dict[str, PartHealth]:
        with self._lock:
            return dict(self._parts)

    # -- readers ---------------------------------------------------------------------------------
    def view(self) -> StatusView:
        with self._lock:
            r = self._readiness
            return StatusView(
                ready=r.ready,
                progress=r.progress(),
                behind=r.behind(),
                waiting_reason=self._waiting_reason,
                source_up=self._source_up,
                source_error=self._source_error,
                resuming=self._resuming,
                query_restarts=self._query_restarts,
                failure=self._failure,
                mismatches=dict(self._mismatches),
                reconcile_rounds=dict(self._reconcile_rounds),
                reconciled_at_ms=self._reconciled_at_ms,
                drift_suspected=dict(self._drift_suspected),
                last_batch=self._last_batch,
                parts=dict(self._parts),
                last_trigger_ms=self._last_trigger_ms,
            )
