"""The driver's share-group state (issue 26): what the `__share_group_state` query's sink applies
(`state.share` bytes per share group), served as ``share_state`` in ``GET /groups/{id}`` and as the
share metrics (`streaming.serving.catalogue.SHARE_METRICS`).

Topic ids are named with the names the lag tracker learned (the share groups' own records and the
cluster's metadata); the lag needs the partition's log end, which the lag reader samples for the
share-partitions this store asks for (`ShareStateStore.wanted`).  Kafka's lag for share groups is
computed against the high watermark (``NetworkPartitionMetadataClient``: READ_UNCOMMITTED).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from state.share import STATE_NAMES, decode, partition_figures
from streaming.serving.catalogue import SHARE_METRICS, MetricDef

TopicPartition = tuple[str, int]
#: (topic, partition) -> high watermark, from the latest round of log offsets
Ends = Callable[[], Mapping[TopicPartition, int]]


class ShareStateStore:
    """Share group id -> (state bytes, summary); undecodable records kept; counts by status."""

    def __init__(self, max_errors: int = 1000) -> None:
        self._lock = threading.Lock()
        self._groups: dict[str, tuple[bytes, dict[str, Any]]] = {}
        self.errors: deque[dict[str, Any]] = deque(maxlen=max_errors)
        #: records read, by status (ok, error, unknown)
        self.records: dict[str, int] = {"ok": 0, "error": 0, "unknown": 0}
        self.counted_batch = -1
        self.last_batch_id = -1
        #: told every batch's applied rows (issue 38: the offset history's share start offsets)
        self.listeners: list[Callable[[list[tuple[str, bytes | None, dict[str, Any] | None]]], object]] = []

    def apply(self, batch_id: int, rows: Iterable[tuple[str, bytes | None, dict[str, Any] | None]]) -> None:
        applied = list(rows)
        with self._lock:
            for gid, blob, summary in applied:
                if blob is None or summary is None:
                    self._groups.pop(gid, None)
                else:
                    self._groups[gid] = (blob, summary)
            self.last_batch_id = max(self.last_batch_id, batch_id)
        for listener in self.listeners:
            listener(applied)

    def count(self, batch_id: int, statuses: Mapping[str, int], errors: Iterable[dict[str, Any]]) -> None:
        """A batch's record counts and undecodable records -- once per batch id (a batch run again
        after a restart is applied again but not counted twice)."""
        with self._lock:
            if batch_id <= self.counted_batch:
                return
            self.counted_batch = batch_id
            for status, n in statuses.items():
                self.records[status] = self.records.get(status, 0) + n
            self.errors.extend(errors)

    def load(self, rows: Iterable[tuple[str, bytes, dict[str, Any]]]) -> int:
        """Share groups recovered from the share query's checkpoint at start."""
        n = 0
        with self._lock:
            for gid, blob, summary in rows:
                self._groups[gid] = (blob, summary)
                n += 1
        return n

    def states(self) -> list[tuple[str, bytes]]:
        with self._lock:
            return [(gid, v[0]) for gid, v in self._groups.items()]

    def blob(self, group_id: str) -> bytes | None:
        with self._lock:
            found = self._groups.get(group_id)
        return None if found is None else found[0]

    def __len__(self) -> int:
        with self._lock:
            return len(self._groups)

    def wanted(self, names: Mapping[str, str]) -> set[TopicPartition]:
        """The share-partitions whose log end the lag reader should sample (named topics only)."""
        out: set[TopicPartition] = set()
        for _, blob in self.states():
            for tid, p in decode(blob).partitions:
                name = names.get(tid)
                if name is not None:
                    out.add((name, p))
        return out


def share_view(blob: bytes, names: Mapping[str, str], ends: Mapping[TopicPartition, int]) -> dict[str, Any]:
    """One share group's ``share_state`` JSON: per share-partition its figures (`partition_figures`,
    lag against the sampled high watermark), counters and kept errors."""
    g = decode(blob)
    partitions = []
    for (tid, p), sp in sorted(
        g.partitions.items(), key=lambda kv: (names.get(kv[0][0], kv[0][0]), kv[0][1])
    ):
        topic = names.get(tid, tid)
        fig = partition_figures(sp, ends.get((topic, p)))
        batches = [
            {
                "first_offset": f,
                "last_offset": la,
                "delivery_state": STATE_NAMES.get(s, str(s)),
                "delivery_count": c,
            }
            for f, la, s, c in sp.batches
        ]
        partitions.append({"topic": topic, "topic_id": tid, "partition": p, **fig, "state_batches": batches})
    lags = [x["lag"] for x in partitions if x["lag"] is not None]
    return {
        "partitions": partitions,
        "lag": sum(lags) if lags else None,
        "counters": dict(g.counters),
        "errors": list(g.errors),
    }


def share_families(
    store: ShareStateStore,
    cluster: str,
    names: Callable[[], Mapping[str, str]],
    ends: Ends,
    wants_partitions: Callable[[str], bool],
) -> list[tuple[MetricDef, list[tuple[tuple[str, ...], float]]]]:
    """The share metrics at a scrape (`streaming.serving.metrics.MirrorMetrics.providers`)."""
    by_name: dict[str, list[tuple[tuple[str, ...], float]]] = {m.name: [] for m in SHARE_METRICS}
    known, sampled = names(), ends()
    for gid, blob in store.states():
        view = share_view(blob, known, sampled)
        if view["lag"] is not None:
            by_name["coordinator_mirror_share_group_lag"].append(((cluster, gid), view["lag"]))
        if not wants_partitions(gid):
            continue
        for x in view["partitions"]:
            tp = (cluster, gid, x["topic"], str(x["partition"]))
            if x["start_offset"] is not None:
                by_name["coordinator_mirror_share_partition_start_offset"].append((tp, x["start_offset"]))
            if x["lag"] is not None:
                by_name["coordinator_mirror_share_partition_lag"].append((tp, x["lag"]))
            if x["in_flight"] is not None:
                by_name["coordinator_mirror_share_partition_in_flight"].append((tp, x["in_flight"]))
            for state in ("available", "acknowledged", "archived"):
                by_name["coordinator_mirror_share_partition_records"].append(((*tp, state), x[state]))
            by_name["coordinator_mirror_share_partition_delivery_attempts"].append(
                (tp, x["delivery_attempts"])
            )
            by_name["coordinator_mirror_share_partition_delivery_count_max"].append(
                (tp, x["max_delivery_count"])
            )
    by_name["coordinator_mirror_share_state_records_total"] = [
        ((cluster, status), n) for status, n in sorted(store.records.items())
    ]
    return [(m, by_name[m.name]) for m in SHARE_METRICS]
