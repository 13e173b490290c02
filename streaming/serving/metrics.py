"""Prometheus exposition of the mirror, rendered at scrape time from the snapshot store.

Nothing is registered per group: every scrape walks the store's current snapshots, so a deleted
group's series vanish from the next scrape without bookkeeping.  What keeps a scrape cheap at
10k groups x 50 partitions:

* a `GroupView` per group -- its static series (labels escaped, values extracted) -- built once
  per snapshot *object* and reused while the store holds that same object (the sink replaces a
  group's snapshot only when the group changed), so a scrape parses no JSON and walks no offsets
  of unchanged groups;
* time-dependent series (seconds to the next expiry, offsets expiring within 1h/24h) from each
  view's sorted deadlines with a bisect;
* `exposition` writes the text format itself from per-view text chunks cached the same way --
  prometheus_client's `generate_latest` formats every sample in Python (~5 us each, seconds at a
  million series).  `registry_for` serves the same series through prometheus_client for callers
  that need a registry; the two agree sample for sample (tested).

Names, types, help and labels come from `streaming.serving.catalogue` only.
"""

from __future__ import annotations

import bisect
import math
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

from state.events import EVENT_TYPES
from streaming.serving.catalogue import (
    BATCH_DURATION_BUCKETS,
    BY_NAME,
    EXPIRY_WINDOWS,
    GROUP_COUNTERS,
    GROUP_METRICS,
    GROUP_STATES,
    MIRROR_METRICS,
    PARTITION_METRICS,
    VERSIONED_RECORD_TYPES,
    MetricDef,
    record_type_label,
)
from streaming.serving.store import MirrorStatus

#: a sample: label values in the family's label order, value
Samples = list[tuple[tuple[str, ...], float]]

_NEXT_EXPIRY: Final = "coordinator_mirror_group_next_offset_expiry_seconds"
_EXPIRING: Final = "coordinator_mirror_group_offsets_expiring"
_TIMED: Final = frozenset({_NEXT_EXPIRY, _EXPIRING})
_STATIC_GROUP: Final = tuple(m for m in GROUP_METRICS if m.name not in _TIMED)
_OFFSET: Final = "kafka_consumergroup_group_offset"
_COMMIT_TS: Final = "kafka_consumergroup_group_commit_timestamp_seconds"
_MODERN: Final = frozenset({"consumer", "share", "streams"})


def escape(value: str) -> str:
    """A label value in the text format: backslash, double quote and newline escaped."""
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def fmt(value: float) -> str:
    """Integers exactly (offsets), other values as Python's shortest round-trip repr."""
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) < 2**53):
        return str(int(value))
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def group_rows(snap: dict[str, Any]) -> dict[str, Samples]:
    """The static per-group series of one snapshot: family name -> [(extra label values, value)]
    (label values after ``cluster_name`` and ``group``)."""
    kind = snap.get("kind") or "unknown"
    state = snap.get("state") or "Unknown"
    s: dict[str, Samples] = {}
    assignor = snap.get("assignor") if "assignor" in snap else snap.get("protocol")
    s["coordinator_mirror_group_info"] = [
        ((kind, snap.get("type") or "", snap.get("protocol_type") or "", assignor or ""), 1)
    ]
    states = GROUP_STATES.get(kind, ())
    if state not in states:
        states = (*states, state)
    s["coordinator_mirror_group_state"] = [((st,), 1 if st == state else 0) for st in states]
    s["coordinator_mirror_group_state_since_timestamp_seconds"] = _seconds(snap.get("state_since_ms"))
    modern = kind in _MODERN
    epoch = snap.get("group_epoch") if modern else snap.get("generation")
    s["coordinator_mirror_group_epoch"] = [] if epoch is None else [((), epoch)]
    ae = snap.get("assignment_epoch") if modern else None
    s["coordinator_mirror_group_assignment_epoch"] = [] if ae is None else [((), ae)]
    s["coordinator_mirror_group_members"] = [((), len(snap.get("members") or ()))]
    s["coordinator_mirror_group_last_rebalance_timestamp_seconds"] = _seconds(snap.get("last_rebalance_ms"))
    counters = snap.get("counters") or {}
    for key, (name, _) in GROUP_COUNTERS.items():
        s[name] = [((), counters.get(key, 0))]
    offsets = snap.get("offsets") or ()
    s["coordinator_mirror_group_offsets"] = [((), len(offsets))]
    newest = max((o.get("commit_timestamp_ms") or 0 for o in offsets), default=0)
    s["coordinator_mirror_group_last_commit_timestamp_seconds"] = _seconds(newest or None)
    return s


class GroupView:
    """One group's series as text, from one snapshot object (immutable while it is current).

    Only strings and one list of ints are kept: tuples and dicts per series would be millions of
    GC-tracked objects at 10k groups x 50 partitions, and the collector's full-heap passes over
    them cost more than rendering."""

    __slots__ = ("chunks", "deadlines", "group_id", "kind", "label", "partitions", "series", "snap", "state")

    def __init__(self, snap: dict[str, Any], cluster: str, per_partition: bool) -> None:
        self.snap = snap
        self.group_id: str = snap["group_id"]
        self.kind: str = snap.get("kind") or "unknown"
        self.state: str = snap.get("state") or "Unknown"
        self.partitions = per_partition
        label = self.label = f'cluster_name="{escape(cluster)}",group="{escape(self.group_id)}"'
        rows = group_rows(snap)
        chunks: list[str] = []
        series = 0
        for m in _STATIC_GROUP:
            extra = m.labels[2:]
            lines = []
            for values, v in rows[m.name]:
                ls = "".join(f',{k}="{escape(x)}"' for k, x in zip(extra, values, strict=True))
                lines.append(f"{m.name}{{{label}{ls}}} {fmt(v)}\n")
            series += len(lines)
            chunks.append("".join(lines))
        offsets = snap.get("offsets") or ()
        if per_partition:
            off: list[str] = []
            ts: list[str] = []
            for o in offsets:
                tp = f'{{{label},topic="{escape(o["topic"])}",partition="{o["partition"]}"}} '
                off.append(f"{_OFFSET}{tp}{fmt(o['offset'])}\n")
                commit_ms = o.get("commit_timestamp_ms")
                if commit_ms is not None:
                    ts.append(f"{_COMMIT_TS}{tp}{fmt(commit_ms / 1000)}\n")
            series += len(off) + len(ts)
            chunks.append("".join(off))
            chunks.append("".join(ts))
        self.chunks = tuple(chunks)
        self.series = series
        self.deadlines = sorted(d for o in offsets if (d := o.get("expires_at_ms")) is not None)

    # -- time-dependent series ---------------------------------------------------------------
    def next_expiry(self, now_ms: int) -> Samples:
        if not self.deadlines:
            return []
        return [((), max(0.0, (self.deadlines[0] - now_ms) / 1000))]

    def expiring(self, now_ms: int) -> Samples:
        return [
            ((window,), bisect.bisect_right(self.deadlines, now_ms + seconds * 1000))
            for window, seconds in EXPIRY_WINDOWS
        ]

    def partition_rows(self, name: str) -> Iterator[tuple[str, str, float]]:
        """(topic, partition, value) of a per-partition family (for `registry_for`)."""
        if not self.partitions:
            return
        for o in self.snap.get("offsets") or ():
            if name == _OFFSET:
                yield o["topic"], str(o["partition"]), o["offset"]
            elif o.get("commit_timestamp_ms") is not None:
                yield o["topic"], str(o["partition"]), o["commit_timestamp_ms"] / 1000


def _seconds(ms: int | None) -> Samples:
    return [] if ms is None else [((), ms / 1000)]


class MirrorMetrics:
    """The per-mirror exporter state: the view cache and what is folded from query progress."""

    def __init__(self, mirror: Any) -> None:
        self.mirror = mirror
        settings = mirror.settings
        self.cluster: str = settings.cluster_name
        self.per_partition: bool = bool(settings.metrics_per_partition)
        regex = settings.metrics_group_regex
        self.group_regex: re.Pattern[str] | None = re.compile(regex) if regex else None
        self.start_time = time.time()
        self._lock = threading.Lock()
        self._views: dict[str, GroupView] = {}
        # folded from mirror.progress_history (which keeps the last 100 batches only)
        self._last_batch_id = -1
        self.batches = 0
        self.input_rows = 0
        self.buckets = [0] * len(BATCH_DURATION_BUCKETS)
        self.duration_sum = 0.0
        self.phase_seconds: dict[str, float] = {}
        self.last_series = 0
        self.last_render_seconds = 0.0

    # -- groups ------------------------------------------------------------------------------
    def _wants_partitions(self, group_id: str) -> bool:
        if not self.per_partition:
            return False
        return self.group_regex is None or self.group_regex.search(group_id) is not None

    def views(self) -> list[GroupView]:
        """Current views, one per snapshot in the store; unchanged snapshots reuse their view."""
        old = self._views
        new: dict[str, GroupView] = {}
        for snap in self.mirror.store.snapshots():
            gid = snap["group_id"]
            v = old.get(gid)
            if v is None or v.snap is not snap:
                v = GroupView(snap, self.cluster, self._wants_partitions(gid))
            new[gid] = v
        self._views = new
        return list(new.values())

    # -- the mirror --------------------------------------------------------------------------
    def _fold_progress(self) -> dict[str, Any] | None:
        history = list(getattr(self.mirror, "progress_history", ()))
        for entry in history:
            if entry["batch_id"] <= self._last_batch_id:
                continue
            self._last_batch_id = entry["batch_id"]
            self.batches += 1
            self.input_rows += int(entry.get("input_rows") or 0)
            durations = entry.get("duration_ms") or {}
            seconds = durations.get("triggerExecution", 0) / 1000
            self.duration_sum += seconds
            for i, bound in enumerate(BATCH_DURATION_BUCKETS):
                if seconds <= bound:
                    self.buckets[i] += 1
            for phase, ms in durations.items():
                self.phase_seconds[phase] = self.phase_seconds.get(phase, 0.0) + ms / 1000
        return history[-1] if history else None

    def mirror_samples(self, views: list[GroupView]) -> dict[str, Samples]:
        m = self.mirror
        store = m.store
        c = self.cluster
        obs: dict[str, int] = dict(getattr(m, "observed", {}) or {})
        r = store.readiness
        out: dict[str, Samples] = {}
        out["coordinator_mirror_start_time_seconds"] = [((c,), self.start_time)]
        out["coordinator_mirror_ready"] = [((c,), 1 if r.ready else 0)]
        health: Callable[[], tuple[bool, Any]] | None = getattr(m, "health", None)
        running: Callable[[], bool] | None = getattr(m, "query_running", None)
        try:
            if running is not None:
                healthy = bool(running())
            else:
                healthy = bool(health()[0]) if health is not None else store.failure is None
        except Exception:  # the JVM side is gone: that is an unhealthy query, not a failed scrape
            healthy = False
        out["coordinator_mirror_query_healthy"] = [((c,), 1 if healthy else 0)]
        status = getattr(store, "status", None) or MirrorStatus()
        out["coordinator_mirror_query_restarts_total"] = [((c,), status.query_restarts)]
        out["coordinator_mirror_source_up"] = [((c,), 1 if status.source_up else 0)]
        out["coordinator_mirror_groups_quarantined"] = [((c,), len(getattr(store, "quarantined", ())))]
        out["coordinator_mirror_reconcile_mismatches"] = [
            ((c, side), len(status.mismatches.get(side, ())))
            for side in ("missing_in_coordinator", "missing_in_mirror")
        ]
        out["coordinator_mirror_catchup_progress_ratio"] = [((c,), r.progress())]
        behind = r.behind()
        out["coordinator_mirror_partition_records_behind"] = [
            ((c, str(p)), n) for p, n in sorted(behind.items())
        ]
        out["coordinator_mirror_records_behind"] = [((c,), sum(behind.values()))]
        out["coordinator_mirror_records_read_total"] = [((c,), obs.get("records", 0))]
        out["coordinator_mirror_records_total"] = _records_by_type(c, obs)
        out["coordinator_mirror_prepared_rows_total"] = [((c,), obs.get("rows", 0))]
        out["coordinator_mirror_offset_commits_total"] = [((c,), obs.get("commits", 0))]
        out["coordinator_mirror_offset_tombstones_total"] = [((c,), obs.get("offset_tombstones", 0))]
        out["coordinator_mirror_decode_errors_total"] = [((c,), obs.get("errors", 0))]
        out["coordinator_mirror_unknown_records_total"] = [((c,), obs.get("unknown", 0))]
        tallies = store.tallies_snapshot()
        out["coordinator_mirror_skipped_records_total"] = [
            ((c, *k[1:]), n) for k, n in sorted(tallies.items()) if k[0] == "skipped"
        ]
        out["coordinator_mirror_events_total"] = _seeded(c, tallies, "event", _event_types())
        out["coordinator_mirror_offsets_expired_total"] = _seeded(
            c, tallies, "offsets_expired", ("mirror", "broker")
        )
        out["coordinator_mirror_groups_deleted_total"] = _seeded(
            c, tallies, "group_deleted", ("tombstone", "expired")
        )
        out["coordinator_mirror_fold_failures_total"] = _seeded(c, tallies, "fold_failure", ())
        by_state: dict[tuple[str, str], int] = {}
        for v in views:
            by_state[(v.state, v.kind)] = by_state.get((v.state, v.kind), 0) + 1
        out["coordinator_mirror_groups"] = [((c, s, k), n) for (s, k), n in sorted(by_state.items())]
        last = self._fold_progress()
        out["coordinator_mirror_batches_total"] = [((c,), self.batches)]
        out["coordinator_mirror_input_rows_total"] = [((c,), self.input_rows)]
        out["coordinator_mirror_batch_input_rows"] = [((c,), int(last["input_rows"]))] if last else []
        out["coordinator_mirror_batch_phase_seconds_total"] = [
            ((c, phase), s) for phase, s in sorted(self.phase_seconds.items())
        ]
        finished = store.last_batch.finished_at_ms
        out["coordinator_mirror_last_batch_timestamp_seconds"] = [((c,), finished / 1000)] if finished else []
        out["coordinator_mirror_state_rows"] = [((c,), sum(last["state_rows"]))] if last else []
        out["coordinator_mirror_state_bytes"] = [((c,), sum(last["state_bytes"]))] if last else []
        out["coordinator_mirror_exporter_series"] = [((c,), self.last_series)]
        out["coordinator_mirror_exporter_render_seconds"] = [((c,), self.last_render_seconds)]
        return out

    def histogram_samples(self) -> list[tuple[str, dict[str, str], float]]:
        c = self.cluster
        name = "coordinator_mirror_batch_duration_seconds"
        out = [
            (f"{name}_bucket", {"cluster_name": c, "le": fmt_le(b)}, float(n))
            for b, n in zip(BATCH_DURATION_BUCKETS, self.buckets, strict=True)
        ]
        out.append((f"{name}_bucket", {"cluster_name": c, "le": "+Inf"}, float(self.batches)))
        out.append((f"{name}_sum", {"cluster_name": c}, self.duration_sum))
        out.append((f"{name}_count", {"cluster_name": c}, float(self.batches)))
        return out

    # -- the two renderers -------------------------------------------------------------------
    def exposition(self) -> bytes:
        """The text format (version 0.0.4), written directly from the cached chunks."""
        with self._lock:
            started = time.perf_counter()
            now_ms = int(time.time() * 1000)
            views = self.views()
            parts: list[str] = []
            for i, m in enumerate(_STATIC_GROUP):
                parts.append(_header(m))
                parts.extend(v.chunks[i] for v in views)
            series = sum(v.series for v in views)
            for name, fn in ((_NEXT_EXPIRY, GroupView.next_expiry), (_EXPIRING, GroupView.expiring)):
                m = BY_NAME[name]
                parts.append(_header(m))
                extra = m.labels[2:]
                for v in views:
                    for values, value in fn(v, now_ms):
                        ls = "".join(f',{k}="{x}"' for k, x in zip(extra, values, strict=True))
                        parts.append(f"{name}{{{v.label}{ls}}} {fmt(value)}\n")
                        series += 1
            n = len(_STATIC_GROUP)
            for i, m in enumerate(PARTITION_METRICS):
                parts.append(_header(m))
                parts.extend(v.chunks[n + i] for v in views if v.partitions)
            mirror = self.mirror_samples(views)
            for m in MIRROR_METRICS:
                parts.append(_header(m))
                if m.type == "histogram":
                    for sname, labels, value in self.histogram_samples():
                        ls = ",".join(f'{k}="{escape(x)}"' for k, x in labels.items())
                        parts.append(f"{sname}{{{ls}}} {fmt(value)}\n")
                        series += 1
                    continue
                for values, value in mirror[m.name]:
                    ls = ",".join(f'{k}="{escape(x)}"' for k, x in zip(m.labels, values, strict=True))
                    parts.append(f"{m.name}{{{ls}}} {fmt(value)}\n")
                    series += 1
            self.last_series = series
            self.last_render_seconds = time.perf_counter() - started
            return "".join(parts).encode("utf-8")

    def families(self) -> Iterator[Metric]:
        """The same series as prometheus_client metric families (for `registry_for`)."""
        with self._lock:
            started = time.perf_counter()
            now_ms = int(time.time() * 1000)
            views = self.views()
            series = 0
            c = self.cluster
            rows = [group_rows(v.snap) for v in views]
            for m in GROUP_METRICS:
                metric = _family(m)
                for v, r in zip(views, rows, strict=True):
                    if m.name == _NEXT_EXPIRY:
                        samples = v.next_expiry(now_ms)
                    elif m.name == _EXPIRING:
                        samples = v.expiring(now_ms)
                    else:
                        samples = r[m.name]
                    for values, value in samples:
                        labels = dict(zip(m.labels, (c, v.group_id, *values), strict=True))
                        metric.samples.append(Sample(m.name, labels, value))
                series += len(metric.samples)
                yield metric
            for m in PARTITION_METRICS:
                metric = _family(m)
                for v in views:
                    for topic, partition, pv in v.partition_rows(m.name):
                        labels = {
                            "cluster_name": c,
                            "group": v.group_id,
                            "topic": topic,
                            "partition": partition,
                        }
                        metric.samples.append(Sample(m.name, labels, pv))
                series += len(metric.samples)
                yield metric
            mirror = self.mirror_samples(views)
            for m in MIRROR_METRICS:
                metric = _family(m)
                if m.type == "histogram":
                    for sname, labels, value in self.histogram_samples():
                        metric.samples.append(Sample(sname, labels, value))
                else:
                    for values, value in mirror[m.name]:
                        metric.samples.append(Sample(m.name, dict(zip(m.labels, values, strict=True)), value))
                series += len(metric.samples)
                yield metric
            self.last_series = series
            self.last_render_seconds = time.perf_counter() - started


def fmt_le(bound: float) -> str:
    """Bucket bounds as prometheus_client writes them (``1.0``, ``0.25``)."""
    return repr(float(bound))


def _header(m: MetricDef) -> str:
    text = m.help.replace("\\", "\\\\").replace("\n", "\\n")
    return f"# HELP {m.name} {text}\n# TYPE {m.name} {m.type}\n"


def _family(m: MetricDef) -> Metric:
    return Metric(m.family, m.help, m.type)


def _records_by_type(cluster: str, obs: dict[str, int]) -> Samples:
    out: Samples = []
    for key, n in obs.items():
        if not n or not key.startswith("type_") or "_v" in key:
            continue
        k = int(key[5:])
        versions = VERSIONED_RECORD_TYPES.get(k, ())
        label = record_type_label(k)
        counted = 0
        for ver in versions:
            nv = obs.get(f"type_{k}_v{ver}", 0)
            if nv:
                out.append(((cluster, label, str(ver)), nv))
                counted += nv
        if n - counted:
            out.append(((cluster, label, "other"), n - counted))
    return sorted(out)


def _seeded(cluster: str, tallies: dict[tuple[str, ...], int], kind: str, seed: Iterable[str]) -> Samples:
    """Counters whose label values are known in advance start at 0 (so ``increase()`` sees the
    first occurrence), plus any other value that turned up."""
    values = dict.fromkeys(seed, 0)
    for key, n in tallies.items():
        if key[0] == kind:
            values[key[1]] = values.get(key[1], 0) + n
    return [((cluster, k), n) for k, n in sorted(values.items())]


def _event_types() -> tuple[str, ...]:
    return tuple(EVENT_TYPES)


class _Collector:
    def __init__(self, metrics: MirrorMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        return self.metrics.families()


def metrics_for(mirror: Any) -> MirrorMetrics:
    """The mirror's exporter state (one per mirror: the view cache lives here)."""
    m: MirrorMetrics | None = getattr(mirror, "_metrics", None)
    if m is None:
        m = MirrorMetrics(mirror)
        mirror._metrics = m
    return m


def registry_for(mirror: Any) -> CollectorRegistry:
    """A prometheus_client registry serving the mirror's series (what ``Mirror.metrics_exposition``
    hands to ``generate_latest``)."""
    reg: CollectorRegistry | None = getattr(mirror, "_registry", None)
    if reg is None:
        reg = CollectorRegistry(auto_describe=False)
        reg.register(_Collector(metrics_for(mirror)))
        mirror._registry = reg
    return reg


def exposition(mirror: Any) -> tuple[bytes, str]:
    """``(body, content type)`` for ``GET /metrics`` -- the fast path, same series as `registry_for`."""
    return metrics_for(mirror).exposition(), CONTENT_TYPE_PLAIN_0_0_4
