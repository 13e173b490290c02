"""The driver's view of the groups: every group's state bytes and summary, their rendered snapshots,
quarantine, reconciliation's verdicts, each group's recent change events and the records that could
not be read.  The mirror's own status (readiness, the source, restarts, the last batch, tallies) is
`streaming.serving.status.MirrorStatus`.

Written by the query's ``foreachBatch`` sink (one writer), read by the HTTP API and the metrics
exporter (many readers).  Snapshot application is idempotent per batch id: replaying a batch
after a restart rewrites the same state.

A group arrives as its state bytes (`state.codec`, ~0.8 KB for 50 offsets) with its small
``GET /groups`` summary: together they are the driver's source of truth.  Everything else is
derived from the bytes: the metrics exporter decodes them into a few numbers per group
(`streaming.serving.metrics`), and ``GET /groups/{id}`` renders the full snapshot (~14 KB of JSON,
~30 KB of Python objects for 50 offsets) when it is read, through a cache bounded in bytes (LRU,
``snapshot_cache_bytes``): a group read again before it changes is not rendered again, a group
that changes in every micro-batch is rendered at most once per read, and 100k groups never hold
100k rendered snapshots.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from typing import Any, Final

from streaming.serving.timeline import Timeline

#: a rendered ``GET /groups/{id}`` snapshot
Snapshot = dict[str, Any]
Renderer = Callable[[bytes], Snapshot]
#: (group id, state bytes -- None if the group was deleted --, summary -- None with no bytes)
GroupRow = tuple[str, bytes | None, dict[str, Any] | None]

DEFAULT_CACHE_BYTES: Final = 64 * 2**20


def snapshot_size(snapshot: Snapshot) -> int:
    """What a rendered snapshot costs in memory, approximately (its Python objects: a dict per
    offset and per member dominate).  Within ~1.5x of tracemalloc's count for the shapes
    tests/test_streaming/test_serving/test_store.py measures; exact accounting would cost more than
    rendering."""
    return 2_000 + 700 * len(snapshot.get("offsets") or ()) + 1_100 * len(snapshot.get("members") or ())


class SnapshotStore:
    """Thread-safe map group id -> (state bytes, summary), with quarantine, verdicts and errors.

    ``renderer`` turns a group's state bytes into its snapshot (`streaming.serving.render.snapshot_renderer`);
    it is needed only when bytes are applied.  ``cache_bytes`` bounds the rendered snapshots kept
    (`snapshot_size` each; 0: none kept)."""

    def __init__(
        self,
        max_errors: int = 1000,
        renderer: Renderer | None = None,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        timeline_events: int = 50,
    ) -> None:
        self._lock = threading.RLock()
        #: group id -> (state bytes, summary)
        self._groups: dict[str, tuple[bytes, dict[str, Any]]] = {}
        #: group id -> (the state bytes it was rendered from, snapshot, size); least recently read first
        self._cache: OrderedDict[str, tuple[bytes, Snapshot, int]] = OrderedDict()
        self._cached_bytes = 0
        self.cache_bytes = cache_bytes
        self.renderer = renderer
        #: recent undecodable / unknown records with their partition and offset (newest last)
        self.errors: deque[dict[str, Any]] = deque(maxlen=max_errors)
        #: quarantined groups (`streaming.pipeline.adapter`): group id -> why (exception, record)
        self.quarantined: dict[str, dict[str, Any]] = {}
        #: groups the coordinator no longer lists (reconciliation): group id -> reason
        self.gone: dict[str, dict[str, Any]] = {}
        #: each group's newest change events (issue 26: ``GET /groups/{id}/timeline``)
        self.timeline = Timeline(timeline_events)

    # -- writes (the foreachBatch thread) ------------------------------------------------------
    def apply(self, batch_id: int, groups: Iterable[GroupRow]) -> None:
        """``groups``: (group id, state bytes -- None if the group was deleted --, summary).  A
        summary is required with state bytes.  ``batch_id`` is the micro-batch's (for the log)."""
        with self._lock:
            for group_id, blob, summary in groups:
                # a fold that succeeded: the group left quarantine; a new record: it exists again
                self.quarantined.pop(group_id, None)
                self.gone.pop(group_id, None)
                self._uncache(group_id)
                if blob is None:
                    if self._groups.pop(group_id, None) is not None:
                        self.timeline.retire((group_id,))
                    continue
                if summary is None or self.renderer is None:
                    raise ValueError(
                        f"batch {batch_id}, group {group_id!r}: state bytes need a summary and a renderer"
                    )
                self._groups[group_id] = (blob, summary)

    def load(self, groups: Iterable[tuple[str, bytes, dict[str, Any]]]) -> int:
        """Bulk-load groups recovered from the checkpointed state at start."""
        n = 0
        with self._lock:
            for group_id, blob, summary in groups:
                self._uncache(group_id)
                self._groups[group_id] = (blob, summary)
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

    def __contains__(self, group_id: object) -> bool:
        """Whether ``GET /groups/{id}`` has something to say of the group (state, or a quarantine)."""
        with self._lock:
            return group_id in self._groups or group_id in self.quarantined

    def group_ids(self) -> set[str]:
        with self._lock:
            return set(self._groups)

    def add_errors(self, errors: Iterable[dict[str, Any]]) -> None:
        with self._lock:
            self.errors.extend(errors)

    def gone_ids(self) -> set[str]:
        """The groups reconciliation marked gone (``exists: false``)."""
        with self._lock:
            return set(self.gone)

    def errors_list(self) -> list[dict[str, Any]]:
        """The recent records that could not be read, oldest first."""
        with self._lock:
            return list(self.errors)

    # -- the snapshot cache (callers hold the lock) --------------------------------------------
    def _uncache(self, group_id: str) -> None:
        hit = self._cache.pop(group_id, None)
        if hit is not None:
            self._cached_bytes -= hit[2]

    def _cache_put(self, group_id: str, blob: bytes, snap: Snapshot) -> None:
        size = snapshot_size(snap)
        if size > self.cache_bytes:
            return
        self._uncache(group_id)
        self._cache[group_id] = (blob, snap, size)
        self._cached_bytes += size
        while self._cached_bytes > self.cache_bytes:
            _, (_, _, evicted) = self._cache.popitem(last=False)
            self._cached_bytes -= evicted

    # -- reads (HTTP, metrics) -----------------------------------------------------------------
    def group(self, group_id: str) -> Snapshot | None:
        """The group's full snapshot: from the cache, else rendered from its bytes (outside the
        lock: the sink keeps applying meanwhile) and cached unless the group changed in between."""
        with self._lock:
            found = self._groups.get(group_id)
            quarantine = self.quarantined.get(group_id)
            gone = self.gone.get(group_id)
            snap = self._cached(group_id, found[0]) if found is not None else None
        if found is not None and snap is None:
            snap = self._render(group_id, found[0])
        return self._overlay(group_id, snap, quarantine, gone)

    def _cached(self, group_id: str, blob: bytes) -> Snapshot | None:
        hit = self._cache.get(group_id)
        if hit is not None and hit[0] is blob:
            self._cache.move_to_end(group_id)
            return hit[1]
        return None

    def _render(self, group_id: str, blob: bytes) -> Snapshot:
        assert self.renderer is not None  # apply() refuses bytes without one
        snap = self.renderer(blob)
        with self._lock:
            current = self._groups.get(group_id)
            if current is not None and current[0] is blob:
                self._cache_put(group_id, blob, snap)
        return snap

    @staticmethod
    def _overlay(
        group_id: str, snap: Snapshot | None, quarantine: dict[str, Any] | None, gone: dict[str, Any] | None
    ) -> Snapshot | None:
        """The snapshot with what the driver knows beside the state: quarantine, reconciliation."""
        if quarantine is None and gone is None:
            return snap
        out: dict[str, Any] = dict(snap) if snap is not None else {"group_id": group_id, "exists": None}
        if quarantine is not None:
            out["quarantine"] = quarantine
        if gone is not None:
            out["exists"] = False
            out["exists_reason"] = gone
        return out

    def states(self) -> list[tuple[str, bytes]]:
        """(group id, state bytes) of every group, in the order the groups first arrived."""
        with self._lock:
            return [(gid, v[0]) for gid, v in self._groups.items()]

    def summaries(self) -> list[dict[str, Any]]:
        with self._lock:
            out = [self._groups[g][1] for g in sorted(self._groups)]
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

    def __len__(self) -> int:
        with self._lock:
            return len(self._groups)
