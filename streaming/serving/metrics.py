"""Prometheus exposition of the mirror, written at scrape time from the groups' state.

Nothing is registered per group: every scrape walks the store's groups, so a deleted group's
series vanish from the next scrape without bookkeeping.  What a scrape reads and what it costs at
10k groups x 50 partitions:

* a `GroupNumbers` per group -- the numbers and label values its series need (state, epochs,
  counters; committed offsets, commit times and expiry deadlines as int arrays) -- decoded from the
  group's state bytes (`state.codec`), never from its rendered HTTP snapshot (the owner labels of
  ``kafka_consumergroup_group_offset`` too: from the decoded members' assignments).  It is built when a
  scrape first meets the group's current bytes and kept while the store holds that same bytes
  object (the sink replaces a group's bytes only when the group changed), so a scrape decodes only
  the groups that changed.  It holds no exposition text: ~2 KB for 50 partitions where the text
  is ~30 KB, and arrays rather than tuples (millions of GC-tracked objects would cost the
  collector's full-heap passes more than rendering);
* the text, written at every scrape straight from those numbers (~0.15 us a line --
  prometheus_client's `generate_latest` formats each sample in Python at ~5 us) into one buffer
  that becomes the response body without a copy;
* time-dependent series (seconds to the next expiry, offsets expiring within 1h/24h) from each
  view's sorted deadlines with a bisect;
* families other modules compute (`MirrorMetrics.providers`), written after the mirror's own;
* the lag families (`streaming.serving.lag_metrics`) last: that text changes only when a round
  of log offsets lands or a group changes, and is cached in between.

Names, types, help and labels come from `streaming.serving.catalogue` only.
"""

from __future__ import annotations

import bisect
import io
import math
import re
import sys
import threading
import time
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from state import codec
from state.abandoned import abandoned_partitions
from state.config import OffsetConfig
from state.events import EVENT_TYPES
from state.expiry import all_deadlines
from state.model import Group
from state.rhythm import commit_rate, oldest_commit_ms, partitions_behind, points
from state.timing import phases
from streaming.health.lag import NO_OWNER, Owner, group_owners
from streaming.serving.catalogue import (
    BATCH_DURATION_BUCKETS,
    BY_NAME,
    EXPIRY_WINDOWS,
    GROUP_COUNTERS,
    GROUP_METRICS,
    GROUP_STATES,
    MIRROR_METRICS,
    PARTITION_METRICS,
    REBALANCE_DURATION_BUCKETS,
    REBALANCE_PHASES,
    SHARE_METRICS,
    VERSIONED_RECORD_TYPES,
    MetricDef,
    record_type_label,
)
from streaming.serving.lag_metrics import lag_exposition
from streaming.serving.render import assignor
from streaming.serving.share import share_families
from streaming.serving.store import MirrorStatus

#: a sample: label values in the family's label order, value
Samples = list[tuple[tuple[str, ...], float]]
#: a family another module contributes: its catalogue entry and its samples (all label values)
Family = tuple[MetricDef, Samples]
#: called at every scrape (under the exporter's lock) for the families it contributes
SampleProvider = Callable[[], Iterable[Family]]

_INFO: Final = "coordinator_mirror_group_info"
_STATE: Final = "coordinator_mirror_group_state"
_NEXT_EXPIRY: Final = "coordinator_mirror_group_next_offset_expiry_seconds"
_EXPIRING: Final = "coordinator_mirror_group_offsets_expiring"
_COMMIT_RATE: Final = "coordinator_mirror_group_commits_per_second"
_REBALANCE_HISTOGRAM: Final = "coordinator_mirror_rebalance_duration_seconds"
#: default of the setting commit_behind_s, in ms (`state.rhythm.partitions_behind`)
DEFAULT_BEHIND_MS: Final = 300_000
_OFFSET: Final = "kafka_consumergroup_group_offset"
_COMMIT_TS: Final = "kafka_consumergroup_group_commit_timestamp_seconds"
_MODERN: Final = frozenset({"consumer", "share", "streams"})
#: "no sample" in an int64 array
_NONE: Final = -(2**63)
#: the per-group families with at most one sample and no label of their own, in catalogue order:
#: name -> whether the value is a time in ms (exposed in seconds)
_SCALAR_MS: Final = {
    m.name: m.name.endswith("_timestamp_seconds")
    for m in GROUP_METRICS
    if m.labels == ("cluster_name", "group") and m.name not in (_NEXT_EXPIRY, _COMMIT_RATE)
}
_SCALARS: Final = tuple(_SCALAR_MS)
#: lines held before they are encoded into the body (keeps the transient strings few)
_FLUSH_PARTS: Final = 8192


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


def _label(value: str | None) -> str:
    # label values repeat across groups (kinds, states, protocols, topics): one string each
    return sys.intern(escape(value or ""))


class GroupNumbers:
    """One group's metric inputs, decoded from its state bytes: numbers and label values, no text.

    ``blob`` is the bytes object it was built from (the cache key: the store replaces it when the
    group changes).  ``scalars`` follows `_SCALARS` (`_NONE`: no sample).  The per-partition arrays
    are kept only for groups that export per-partition series, in ``(topic, partition)`` order,
    with ``topics`` as runs of (escaped topic, number of partitions); ``owners`` indexes each
    partition's owner labels (the member assigned it, kafka-lag-exporter's ``member_host``,
    ``consumer_id``, ``client_id``) in ``owner_labels``, whose first entry is the unknown owner."""

    __slots__ = (
        "abandoned",
        "blob",
        "commits",
        "deadlines",
        "group_id",
        "info",
        "kind",
        "offsets",
        "owner_labels",
        "owners",
        "partitions",
        "phases",
        "scalars",
        "state",
        "topics",
        "window",
    )

    topics: tuple[tuple[str, int], ...]
    partitions: array[int] | None
    offsets: array[int] | None
    commits: array[int] | None
    owners: array[int] | None
    owner_labels: tuple[str, ...]

    def __init__(
        self,
        group_id: str,
        blob: bytes,
        config: OffsetConfig,
        default_assignor: str,
        per_partition: bool,
        *,
        behind_ms: int = DEFAULT_BEHIND_MS,
    ) -> None:
        g = codec.decode(blob)
        deadlines = all_deadlines(g, config)
        self.blob = blob
        self.group_id = group_id
        # kind and state as they are (the mirror-level count escapes them), the info labels escaped
        kind = self.kind = sys.intern(g.display_kind or "unknown")
        self.state = sys.intern(g.state or "Unknown")
        modern = kind in _MODERN
        protocol_type = kind if modern else g.protocol_type
        self.info = (
            _label(kind),
            _label(g.group_type),
            _label(protocol_type),
            _label(assignor(g, default_assignor)[0]),
        )
        # issue 26: the last timed rebalance's phases, abandoned topics, the commit-rate window
        t = g.last_timing
        self.phases = () if t is None else tuple(phases(kind, t.started_ms, t.assigned_ms, t.stable_ms))
        abandoned = abandoned_partitions(g)
        by_topic: dict[str, list[int]] = {}
        for tp in abandoned:
            d = deadlines.get(tp)
            entry = by_topic.setdefault(tp[0], [0, _NONE])
            entry[0] += 1
            if d is not None and (entry[1] == _NONE or d < entry[1]):
                entry[1] = d
        self.abandoned = tuple((_label(topic), n, d) for topic, (n, d) in sorted(by_topic.items()))
        self.window = points(g.commit_window)
        values = _scalar_values(g, modern, abandoned, behind_ms)
        self.scalars = array("q", (_NONE if v is None else v for v in values))
        self.deadlines = array("q", sorted(d for d in deadlines.values() if d is not None))
        self.topics = ()
        self.partitions = self.offsets = self.commits = self.owners = None
        self.owner_labels = _NO_OWNER_LABELS
        if per_partition and g.offsets:
            entries = sorted(g.offsets.items())
            runs = Counter(topic for (topic, _), _ in entries)  # insertion order = sorted order
            self.topics = tuple((_label(t), n) for t, n in runs.items())
            self.partitions = array("q", (p for (_, p), _ in entries))
            self.offsets = array("q", (e[0] for _, e in entries))
            self.commits = array("q", (_NONE if e[3] is None else e[3] for _, e in entries))
            owners = group_owners(g)
            index: dict[Owner, int] = {NO_OWNER: 0}
            for owner in owners.values():
                index.setdefault(owner, len(index))
            self.owner_labels = tuple(_owner_labels(o) for o in index)
            self.owners = array("i", (index[owners.get(tp, NO_OWNER)] for tp, _ in entries))

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

    def rebalance_phases(self, now_ms: int) -> Samples:
        return [((phase,), ms / 1000) for phase, ms in self.phases]

    def commit_rate(self, now_ms: int) -> Samples:
        rate = commit_rate(self.window, now_ms)  # (t, commits) pairs
        return [] if rate is None else [((), rate)]

    def abandoned_offsets(self, now_ms: int) -> Samples:
        return [((topic,), n) for topic, n, _ in self.abandoned]

    def abandoned_expiry(self, now_ms: int) -> Samples:
        return [((topic,), d / 1000) for topic, _, d in self.abandoned if d != _NONE]


def _owner_labels(o: Owner) -> str:
    return (
        f'member_host="{escape(o.member_host)}",consumer_id="{escape(o.consumer_id)}",'
        f'client_id="{escape(o.client_id)}"'
    )


_NO_OWNER_LABELS: Final = (_owner_labels(NO_OWNER),)


#: per-group families with labels of their own (or time-dependent): name -> the view's method
_LABELLED: Final = {
    _NEXT_EXPIRY: GroupNumbers.next_expiry,
    _EXPIRING: GroupNumbers.expiring,
    "coordinator_mirror_group_rebalance_duration_seconds": GroupNumbers.rebalance_phases,
    _COMMIT_RATE: GroupNumbers.commit_rate,
    "coordinator_mirror_group_abandoned_offsets": GroupNumbers.abandoned_offsets,
    "coordinator_mirror_group_abandoned_expiry_timestamp_seconds": GroupNumbers.abandoned_expiry,
}


def _scalar_values(g: Group, modern: bool, abandoned: frozenset[Any], behind_ms: int) -> list[int | None]:
    """The `_SCALARS` of a group, in that order."""
    newest = max((e[3] or 0 for e in g.offsets.values()), default=0)
    by_name: dict[str, int | None] = {
        "coordinator_mirror_group_state_since_timestamp_seconds": g.state_since_ms,
        "coordinator_mirror_group_epoch": g.group_epoch if modern else g.generation,
        "coordinator_mirror_group_assignment_epoch": g.assignment_epoch if modern else None,
        "coordinator_mirror_group_members": len(g.members),
        "coordinator_mirror_group_last_rebalance_timestamp_seconds": g.last_rebalance_ms,
        "coordinator_mirror_group_offsets": len(g.offsets),
        "coordinator_mirror_group_last_commit_timestamp_seconds": newest or None,
        "coordinator_mirror_group_oldest_commit_timestamp_seconds": oldest_commit_ms(g, abandoned),
        "coordinator_mirror_group_partitions_behind": partitions_behind(g, behind_ms, abandoned)
        if g.offsets
        else None,
    }
    for key, (name, _) in GROUP_COUNTERS.items():
        by_name[name] = g.counters.get(key, 0)
    return [by_name[name] for name in _SCALARS]


def _ms(value: int) -> str:
    """A time in ms as seconds, exactly: ``1700000000123e-3`` is the same float as ms / 1000."""
    return f"{value}e-3"


class _Body:
    """The response body, written as it is rendered: parts are joined and encoded a few thousand at
    a time, so neither a million small strings nor a second copy of the body are ever alive.  The
    buffer starts at ``size_hint`` bytes (the last body's size, plus a margin): growing a 150 MB
    buffer from nothing costs ~70 reallocations copying ~9x its size; a fresh zeroed allocation of
    the hinted size costs nothing until written."""

    def __init__(self, size_hint: int = 0) -> None:
        self.out = io.BytesIO(bytes(size_hint)) if size_hint else io.BytesIO()
        self.parts: list[str] = []
        self.series = 0

    def flush(self) -> None:
        if self.parts:
            self.out.write("".join(self.parts).encode("utf-8"))
            self.parts.clear()

    def header(self, m: MetricDef) -> None:
        self.flush()
        text = m.help.replace("\\", "\\\\").replace("\n", "\\n")
        self.parts.append(f"# HELP {m.name} {text}\n# TYPE {m.name} {m.type}\n")

    def samples(self, m: MetricDef, samples: Samples, prefix: str = "", written: int = 0) -> None:
        """Samples with their own label values: the family's labels after the first ``written``,
        which ``prefix`` holds as text."""
        labels = m.labels[written:]
        sep = "," if prefix and labels else ""
        for values, value in samples:
            ls = ",".join(f'{k}="{escape(x)}"' for k, x in zip(labels, values, strict=True))
            self.parts.append(f"{m.name}{{{prefix}{sep}{ls}}} {fmt(value)}\n")
        self.series += len(samples)

    def getvalue(self) -> bytes:
        self.flush()
        self.out.truncate()  # the hinted size's unwritten tail
        return self.out.getvalue()  # BytesIO hands its buffer over: no copy


def _write_groups(body: _Body, views: Sequence[GroupNumbers], cluster: str, now_ms: int) -> None:
    """Every per-group and per-partition family, one family at a time (the text format wants a
    family's samples together)."""
    c = escape(cluster)
    labels = [f'cluster_name="{c}",group="{escape(v.group_id)}"' for v in views]
    _write_group_families(body, views, labels, now_ms)
    _write_partition_families(body, views, labels)


def _write_group_families(body: _Body, views: Sequence[GroupNumbers], labels: list[str], now_ms: int) -> None:
    parts = body.parts
    n = len(views)
    for m in GROUP_METRICS:
        body.header(m)
        name = m.name
        if name == _INFO:
            for v, lab in zip(views, labels, strict=True):
                k, t, pt, a = v.info
                parts.append(f'{name}{{{lab},kind="{k}",type="{t}",protocol_type="{pt}",protocol="{a}"}} 1\n')
            body.series += n
        elif name == _STATE:
            for v, lab in zip(views, labels, strict=True):
                states = GROUP_STATES.get(v.kind, ())
                if v.state not in states:
                    states = (*states, v.state)
                parts.extend(
                    f'{name}{{{lab},state="{escape(s)}"}} {1 if s == v.state else 0}\n' for s in states
                )
                body.series += len(states)
        elif name in _SCALAR_MS:
            i = _SCALARS.index(name)
            if _SCALAR_MS[name]:
                lines = [
                    f"{name}{{{lab}}} {x}e-3\n"
                    for v, lab in zip(views, labels, strict=True)
                    if (x := v.scalars[i]) != _NONE
                ]
            else:
                lines = [
                    f"{name}{{{lab}}} {x}\n"
                    for v, lab in zip(views, labels, strict=True)
                    if (x := v.scalars[i]) != _NONE
                ]
            parts.extend(lines)
            body.series += len(lines)
        else:  # families with labels of their own, or time-dependent ones
            fn = _LABELLED[name]
            for v, lab in zip(views, labels, strict=True):
                body.samples(m, fn(v, now_ms), lab, 2)
        body.flush()


def _write_partition_families(body: _Body, views: Sequence[GroupNumbers], labels: list[str]) -> None:
    parts = body.parts
    for m in PARTITION_METRICS:
        body.header(m)
        name = m.name
        for v, lab in zip(views, labels, strict=True):
            if v.partitions is None:
                continue
            values = v.offsets if name == _OFFSET else v.commits
            assert values is not None and v.owners is not None
            before = len(parts)
            start = 0
            for topic, count in v.topics:
                tp = f'{name}{{{lab},topic="{topic}",partition="'
                end = start + count
                pv = zip(v.partitions[start:end], values[start:end], strict=True)
                if name == _OFFSET:
                    own = v.owner_labels
                    parts.extend(
                        [
                            f'{tp}{p}",{own[i]}}} {x}\n'
                            for (p, x), i in zip(pv, v.owners[start:end], strict=True)
                        ]
                    )
                else:
                    parts.extend([f'{tp}{p}"}} {x}e-3\n' for p, x in pv if x != _NONE])
                start = end
            body.series += len(parts) - before
            if len(parts) > _FLUSH_PARTS:
                body.flush()
        body.flush()


class MirrorMetrics:
    """The per-mirror exporter state: the group views and what is folded from query progress."""

    def __init__(self, mirror: Any) -> None:
        self.mirror = mirror
        settings = mirror.settings
        self.cluster: str = settings.cluster_name
        self.per_partition: bool = bool(settings.metrics_per_partition)
        regex = settings.metrics_group_regex
        self.group_regex: re.Pattern[str] | None = re.compile(regex) if regex else None
        #: the state layer's configuration the mirror built once (expiry deadlines)
        self.config: OffsetConfig = mirror.offset_config
        self.behind_ms = int(getattr(settings, "commit_behind_s", DEFAULT_BEHIND_MS / 1000) * 1000)
        self.default_assignor: str = settings.default_server_assignor
        #: families computed elsewhere, written after the mirror's own at every scrape
        self.providers: list[SampleProvider] = []
        self.start_time = time.time()
        self._lock = threading.Lock()
        self._views: dict[str, GroupNumbers] = {}
        # folded from mirror.progress_history (which keeps the last 100 batches only)
        self._last_batch_id = -1
        self.batches = 0
        self.input_rows = 0
        self.buckets = [0] * len(BATCH_DURATION_BUCKETS)
        self.duration_sum = 0.0
        self.phase_seconds: dict[str, float] = {}
        self.last_series = 0
        self.last_render_seconds = 0.0
        self._last_size = 0

    # -- groups ------------------------------------------------------------------------------
    def _wants_partitions(self, group_id: str) -> bool:
        if not self.per_partition:
            return False
        return self.group_regex is None or self.group_regex.search(group_id) is not None

    def views(self) -> list[GroupNumbers]:
        """Current views, one per group in the store; a group whose bytes did not change keeps its view."""
        old = self._views
        new: dict[str, GroupNumbers] = {}
        for gid, blob in self.mirror.store.states():
            v = old.get(gid)
            if v is None or v.blob is not blob:
                v = GroupNumbers(
                    gid,
                    blob,
                    self.config,
                    self.default_assignor,
                    self._wants_partitions(gid),
                    behind_ms=self.behind_ms,
                )
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

    def mirror_samples(self, views: Sequence[GroupNumbers]) -> dict[str, Samples]:
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
        out["coordinator_mirror_reconcile_rounds_total"] = [
            ((c, outcome), status.reconcile_rounds.get(outcome, 0))
            for outcome in ("ok", "error", "not_authorized")
        ]
        out["coordinator_mirror_drift_suspected_total"] = [
            ((c, reason), status.drift_suspected.get(reason, 0)) for reason in ("log_start", "downtime")
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
        out["coordinator_mirror_events_total"] = _seeded(c, tallies, "event", EVENT_TYPES)
        out["coordinator_mirror_offsets_expired_total"] = _seeded(
            c, tallies, "offsets_expired", ("mirror", "broker")
        )
        out["coordinator_mirror_groups_deleted_total"] = _seeded(
            c, tallies, "group_deleted", ("tombstone", "expired")
        )
        out["coordinator_mirror_fold_failures_total"] = _seeded(c, tallies, "fold_failure", ())
        by_state = Counter((v.state, v.kind) for v in views)
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

    def histogram_samples(
        self, name: str = "coordinator_mirror_batch_duration_seconds"
    ) -> list[tuple[str, dict[str, str], float]]:
        if name == _REBALANCE_HISTOGRAM:
            return self.rebalance_histogram()
        c = self.cluster
        out = [
            (f"{name}_bucket", {"cluster_name": c, "le": fmt_le(b)}, float(n))
            for b, n in zip(BATCH_DURATION_BUCKETS, self.buckets, strict=True)
        ]
        out.append((f"{name}_bucket", {"cluster_name": c, "le": "+Inf"}, float(self.batches)))
        out.append((f"{name}_sum", {"cluster_name": c}, self.duration_sum))
        out.append((f"{name}_count", {"cluster_name": c}, float(self.batches)))
        return out

    def share_samples(self) -> list[Family]:
        """The share families (issue 26), from the mirror's `ShareStateStore` (none: no samples):
        share-partitions named with the lag tracker's topic names, lag against its latest round."""
        store = getattr(self.mirror, "share_store", None)
        lag = getattr(self.mirror, "lag", None)
        if store is None or lag is None:
            return [(m, []) for m in SHARE_METRICS]

        def names() -> dict[str, str]:
            return dict(lag.topic_names)

        def ends() -> dict[tuple[str, int], int]:
            r = lag.round
            return {} if r is None else {tp: e.high_watermark for tp, e in r.partitions.items()}

        return share_families(store, self.cluster, names, ends, self._wants_partitions)

    def rebalance_histogram(self) -> list[tuple[str, dict[str, str], float]]:
        """`coordinator_mirror_rebalance_duration_seconds` from the timed rebalances' tallies
        (`streaming.pipeline.sinks.observe_rebalance`), per kind and phase seen."""
        tallies = self.mirror.store.tallies_snapshot()
        seen = sorted(
            {(k[1], k[2]) for k in tallies if k[0] == "rebalance_seconds"},
            key=lambda kp: (kp[0], REBALANCE_PHASES.index(kp[1]) if kp[1] in REBALANCE_PHASES else 99, kp[1]),
        )
        name = _REBALANCE_HISTOGRAM
        out: list[tuple[str, dict[str, str], float]] = []
        for kind, phase in seen:
            labels = {"cluster_name": self.cluster, "kind": kind, "phase": phase}
            base = ("rebalance_seconds", kind, phase)
            count = float(tallies.get((*base, "count"), 0))
            for bound in REBALANCE_DURATION_BUCKETS:
                n = tallies.get((*base, f"le:{bound}"), 0)
                out.append((f"{name}_bucket", {**labels, "le": fmt_le(bound)}, float(n)))
            out.append((f"{name}_bucket", {**labels, "le": "+Inf"}, count))
            out.append((f"{name}_sum", labels, tallies.get((*base, "sum_ms"), 0) / 1000))
            out.append((f"{name}_count", labels, count))
        return out

    # -- the exposition ----------------------------------------------------------------------
    def exposition(self) -> bytes:
        """The text format (version 0.0.4)."""
        with self._lock:
            started = time.perf_counter()
            now_ms = int(time.time() * 1000)
            views = self.views()
            body = _Body(self._last_size + self._last_size // 8 + 2**16 if self._last_size else 0)
            _write_groups(body, views, self.cluster, now_ms)
            mirror = self.mirror_samples(views)
            for m in MIRROR_METRICS:
                body.header(m)
                if m.type == "histogram":
                    for sname, labels, value in self.histogram_samples(m.name):
                        ls = ",".join(f'{k}="{escape(x)}"' for k, x in labels.items())
                        body.parts.append(f"{sname}{{{ls}}} {fmt(value)}\n")
                        body.series += 1
                else:
                    body.samples(m, mirror[m.name])
            for provider in (*self.providers, self.share_samples):
                for m, samples in provider():
                    body.header(m)
                    body.samples(m, samples)
            # the lag families: their own cached text (not counted in ``last_series``), written
            # into the same buffer so the body is never copied
            body.flush()
            body.out.write(lag_exposition(self.mirror))
            out = body.getvalue()
            self._last_size = len(out)
            self.last_series = body.series
            self.last_render_seconds = time.perf_counter() - started
            return out


def fmt_le(bound: float) -> str:
    """Bucket bounds as prometheus_client writes them (``1.0``, ``0.25``)."""
    return repr(float(bound))


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


def metrics_for(mirror: Any) -> MirrorMetrics:
    """The mirror's exporter state (one per mirror: the view cache lives here)."""
    m: MirrorMetrics | None = getattr(mirror, "_metrics", None)
    if m is None:
        m = MirrorMetrics(mirror)
        mirror._metrics = m
    return m


OPENMETRICS_CONTENT_TYPE: Final = "application/openmetrics-text; version=1.0.0; charset=utf-8"
#: "# HELP x_total" / "# TYPE x_total counter": OpenMetrics names a counter family without _total
_COUNTER_HEADER: Final = re.compile(rb"^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*)_total\b", re.MULTILINE)


def to_openmetrics(text: bytes) -> bytes:
    """The text format (0.0.4) as OpenMetrics 1.0: for the series of this catalogue the two differ
    only in the counter families' names (without ``_total`` in HELP and TYPE; samples keep it) and
    the closing ``# EOF``."""
    counters = {m.name.encode() for m in BY_NAME.values() if m.type == "counter"}

    def family(match: re.Match[bytes]) -> bytes:
        name = match.group(2) + b"_total"
        return b"# %s %s" % (match.group(1), match.group(2) if name in counters else name)

    return _COUNTER_HEADER.sub(family, text) + b"# EOF\n"


def openmetrics_exposition(mirror: Any) -> tuple[bytes, str]:
    """``(body, content type)`` in OpenMetrics 1.0, for scrapers that ask for it."""
    return to_openmetrics(metrics_for(mirror).exposition()), OPENMETRICS_CONTENT_TYPE


def exposition(mirror: Any) -> tuple[bytes, str]:
    """``(body, content type)`` for ``GET /metrics``."""
    return metrics_for(mirror).exposition(), CONTENT_TYPE_PLAIN_0_0_4
