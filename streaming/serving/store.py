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

import heapq
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from streaming.serving.catalogue import PREVIEW_DELAY_BUCKETS
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
        #: (next expiry deadline, group id) of every state applied since, earliest first -- an
        #: entry outlived by a newer state of its group is dropped when it comes up (`due_deadline`)
        self._deadlines: list[tuple[int, str]] = []
        #: where the states applied so far have read the topic to: the next offset per partition
        #: of the last micro-batch applied (or of the driver's backfill, or of the checkpoint's
        #: last committed batch at a restart); None until known
        self._covered: dict[int, int] | None = None
        #: groups whose state the preview (`streaming.app.preview`) folded past ``_covered``:
        #: group id -> (partition, the last offset folded) -- a micro-batch that has not read that
        #: far leaves the group's state as the preview made it
        self._ahead: dict[str, tuple[int, int]] = {}
        #: groups the preview must leave alone until a micro-batch reads past an offset: group id
        #: -> (partition, offset) -- records of them it could not fold on a state that had them all
        self._held: dict[str, tuple[int, int]] = {}
        #: the preview's calls by outcome: "folded", "left" (to the group's micro-batch)
        self.preview_counts: dict[str, int] = {"folded": 0, "left": 0}
        #: the preview's delay (`observe_preview_delay`): counts per bucket of
        #: `PREVIEW_DELAY_BUCKETS`, then the sum of the seconds and the count
        self.preview_delays: list[int] = [0] * len(PREVIEW_DELAY_BUCKETS)
        self.preview_delay_sum = 0.0
        self.preview_delay_count = 0

    # -- writes (the foreachBatch thread) ------------------------------------------------------
    def apply(
        self, batch_id: int, groups: Iterable[GroupRow], covered: Mapping[int, int] | None = None
    ) -> None:
        """``groups``: (group id, state bytes -- None if the group was deleted --, summary).  A
        summary is required with state bytes.  ``batch_id`` is the micro-batch's (for the log);
        ``covered``: where its read ended (the next offset per partition), when known.

        A group the preview has folded past what this batch read keeps the preview's state: it
        already holds this batch's records of the group, and later ones."""
        with self._lock:
            if covered is not None:
                self._cover(covered)
            ahead = self._ahead
            for group_id, blob, summary in groups:
                if ahead and self._is_ahead(group_id):
                    continue
                self._put(batch_id, group_id, blob, summary)

    def _put(self, batch_id: int, group_id: str, blob: bytes | None, summary: dict[str, Any] | None) -> None:
        # a fold that succeeded: the group left quarantine; a new record: it exists again
        self.quarantined.pop(group_id, None)
        self.gone.pop(group_id, None)
        self._uncache(group_id)
        if blob is None:
            if self._groups.pop(group_id, None) is not None:
                self.timeline.retire((group_id,))
            return
        if summary is None or self.renderer is None:
            raise ValueError(
                f"batch {batch_id}, group {group_id!r}: state bytes need a summary and a renderer"
            )
        self._groups[group_id] = (blob, summary)
        self._index_deadline(group_id, summary)

    # -- the preview (`streaming.app.preview`: the driver folds new records before their batch) --
    def cover(self, covered: Mapping[int, int]) -> None:
        """The states held have read the topic up to ``covered`` (the next offset per partition):
        the driver's backfill, or the checkpoint's last committed batch at a restart."""
        with self._lock:
            self._cover(covered)

    def _cover(self, covered: Mapping[int, int]) -> None:
        mine = self._covered if self._covered is not None else {}
        for p, at in covered.items():
            if at > mine.get(p, -1):
                mine[p] = int(at)
        self._covered = mine
        for held in (self._ahead, self._held):
            if held:
                for gid in [g for g, (p, last) in held.items() if mine.get(p, -1) > last]:
                    del held[gid]

    def _is_ahead(self, group_id: str) -> bool:
        found = self._ahead.get(group_id)
        return found is not None and (self._covered or {}).get(found[0], -1) <= found[1]

    def covered(self) -> dict[int, int] | None:
        """Where the states held have read the topic to (None: not known yet)."""
        with self._lock:
            return None if self._covered is None else dict(self._covered)

    def preview(
        self,
        group_id: str,
        partition: int,
        first: int,
        last: int,
        fold: Callable[[bytes | None], tuple[bool, bytes | None, dict[str, Any] | None]],
    ) -> bool:
        """Fold one group's new records -- offsets ``first`` to ``last`` of ``partition``, none
        of them in the state held -- into its state now, before the micro-batch that reads them.
        ``fold(state bytes or None)`` returns (ok, the new state bytes -- None: deleted --, its
        summary); not ok (the fold failed): the group is left to its batch.  False when the group
        was left alone: quarantined, its state already holding some of these records (a batch
        applied since they were read), or held until a batch reads past records it could not
        preview."""
        with self._lock:
            covered = self._covered
            if covered is None:
                return False
            held = self._held.get(group_id)
            ahead = self._ahead.get(group_id)
            if (
                group_id in self.quarantined
                or (held is not None and covered.get(held[0], -1) <= held[1])
                or first < covered.get(partition, 0)
                or (ahead is not None and first <= ahead[1])
            ):
                # every record refused holds the group: a later preview would lack it
                return self._hold(group_id, partition, last)
            found = self._groups.get(group_id)
            ok, blob, summary = fold(found[0] if found is not None else None)
            if not ok:
                return self._hold(group_id, partition, last)
            self._put(-1, group_id, blob, summary)
            self._ahead[group_id] = (partition, last)
            self.preview_counts["folded"] += 1
            return True

    def observe_preview_delay(self, seconds: float) -> None:
        """A poll's oldest record folded, ``seconds`` after it was written."""
        with self._lock:
            for i, bound in enumerate(PREVIEW_DELAY_BUCKETS):
                if seconds <= bound:
                    self.preview_delays[i] += 1
            self.preview_delay_sum += seconds
            self.preview_delay_count += 1

    def preview_delay(self) -> tuple[list[int], float, int]:
        """(counts per bucket, sum of seconds, count) of `observe_preview_delay`."""
        with self._lock:
            return list(self.preview_delays), self.preview_delay_sum, self.preview_delay_count

    def ahead(self) -> int:
        """How many groups are served with a state their micro-batch has not made yet."""
        with self._lock:
            covered = self._covered or {}
            return sum(1 for p, last in self._ahead.values() if covered.get(p, -1) <= last)

    def _hold(self, group_id: str, partition: int, last: int) -> bool:
        held = self._held.get(group_id)
        self._held[group_id] = (partition, max(last, held[1] if held is not None else -1))
        self.preview_counts["left"] += 1
        return False

    def load(self, groups: Iterable[tuple[str, bytes, dict[str, Any]]]) -> int:
        """Bulk-load groups recovered from the checkpointed state at start."""
        n = 0
        with self._lock:
            for group_id, blob, summary in groups:
                self._uncache(group_id)
                self._groups[group_id] = (blob, summary)
                self._index_deadline(group_id, summary)
                n += 1
        return n

    def _index_deadline(self, group_id: str, summary: dict[str, Any]) -> None:
        deadline = summary.get("next_deadline_ms")
        if deadline is None:
            return
        heap = self._deadlines
        heapq.heappush(heap, (int(deadline), group_id))
        if len(heap) > 2 * len(self._groups) + 1024:
            # replaced states' entries sink only when they come up: rebuilt from the current states
            # once they are half the heap (each push pays O(1) of it, amortised)
            heap[:] = [
                (int(d), gid)
                for gid, (_blob, summ) in self._groups.items()
                if (d := summ.get("next_deadline_ms")) is not None
            ]
            heapq.heapify(heap)

    def due_deadline(self, covered_ms: int) -> int | None:
        """The earliest expiry deadline of a group's current state that is not below
        ``covered_ms`` (None: none) -- the next moment the expiry rules have something to do for
        some group, once every deadline below ``covered_ms`` has been acted on (a micro-batch with
        a later timestamp ran: Spark fires a group's timeout in the first batch after it).
        Deadlines below it are forgotten, as are those of states replaced since."""
        with self._lock:
            heap = self._deadlines
            while heap:
                deadline, group_id = heap[0]
                found = self._groups.get(group_id)
                if (
                    deadline >= covered_ms
                    and found is not None
                    and found[1].get("next_deadline_ms") == deadline
                ):
                    return deadline
                heapq.heappop(heap)
            return None

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
