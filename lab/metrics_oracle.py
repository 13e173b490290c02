"""The exporter's test oracle: the same series through prometheus_client, derived another way.

`streaming.serving.metrics` writes the text format itself from numbers decoded out of each
group's state bytes.  This collector derives every per-group and per-partition series from the
group's *rendered snapshot* (``GET /groups/{id}``, `SnapshotStore.group`) instead, and lets
prometheus_client format them; the mirror-level series come from the exporter's own
`MirrorMetrics.mirror_samples` (they have one source).  `test_serving/test_metrics.py` checks the two agree
sample for sample.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

from streaming.health.lag import NO_OWNER, snapshot_owners
from streaming.serving.catalogue import (
    EXPIRY_WINDOWS,
    GROUP_COUNTERS,
    GROUP_METRICS,
    GROUP_STATES,
    MIRROR_METRICS,
    PARTITION_METRICS,
    MetricDef,
)
from streaming.serving.metrics import MirrorMetrics, Samples

_MODERN = frozenset({"consumer", "share", "streams"})


def _seconds(ms: int | None) -> Samples:
    return [] if ms is None else [((), ms / 1000)]


def group_rows(snap: dict[str, Any], now_ms: int, behind_ms: int = 300_000) -> dict[str, Samples]:
    """Every per-group series of one snapshot: family name -> [(extra label values, value)]
    (label values after ``cluster_name`` and ``group``)."""
    kind = snap.get("kind") or "unknown"
    state = snap.get("state") or "Unknown"
    s: dict[str, Samples] = {}
    s["coordinator_mirror_group_info"] = [
        ((kind, snap.get("type") or "", snap.get("protocol_type") or "", snap.get("assignor") or ""), 1)
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
    deadlines = sorted(d for o in offsets if (d := o.get("expires_at_ms")) is not None)
    s["coordinator_mirror_group_next_offset_expiry_seconds"] = (
        [((), max(0.0, (deadlines[0] - now_ms) / 1000))] if deadlines else []
    )
    s["coordinator_mirror_group_offsets_expiring"] = [
        ((window,), sum(1 for d in deadlines if d <= now_ms + seconds * 1000))
        for window, seconds in EXPIRY_WINDOWS
    ]
    # issue 26, from the snapshot's own fields
    last = (snap.get("rebalance_timing") or {}).get("last")
    s["coordinator_mirror_group_rebalance_duration_seconds"] = [
        ((phase,), ms / 1000) for phase, ms in ((last or {}).get("phases_ms") or {}).items()
    ]
    window = snap.get("commit_window") or []
    span = max(now_ms, window[-1][0]) - window[0][0] if len(window) >= 2 else 0
    s["coordinator_mirror_group_commits_per_second"] = (
        [((), (window[-1][1] - window[0][1]) * 1000 / span)] if span > 0 else []
    )
    active = [o for o in offsets if not o.get("abandoned")]
    oldest = min((o["commit_timestamp_ms"] for o in active), default=None)
    s["coordinator_mirror_group_oldest_commit_timestamp_seconds"] = _seconds(oldest)
    s["coordinator_mirror_group_partitions_behind"] = (
        [((), sum(1 for o in active if (o.get("commit_trails_ms") or 0) > behind_ms))] if offsets else []
    )
    # issue 38: epoch bumps by cause; classic generations are rebalances only
    bumps: Samples = [(("rebalance",), counters.get("rebalances", 0))]
    if modern:
        bumps += [
            (("static_rejoin",), counters.get("static_rejoins", 0)),
            (("share_initialization",), counters.get("share_initializations", 0)),
        ]
    s["coordinator_mirror_group_epoch_bumps_total"] = bumps
    abandoned = snap.get("abandoned_topics") or {}
    s["coordinator_mirror_group_abandoned_offsets"] = [
        ((topic,), len(a["partitions"])) for topic, a in sorted(abandoned.items())
    ]
    s["coordinator_mirror_group_abandoned_expiry_timestamp_seconds"] = [
        ((topic,), a["expires_at_ms"] / 1000)
        for topic, a in sorted(abandoned.items())
        if a["expires_at_ms"] is not None
    ]
    return s


def partition_rows(snap: dict[str, Any], name: str) -> Iterator[tuple[tuple[str, ...], float]]:
    """(label values after ``group``, value) of a per-partition family; the committed offset
    carries its owner (the member whose assignment in the snapshot holds the partition)."""
    owners = snapshot_owners(snap) if name == "kafka_consumergroup_group_offset" else {}
    for o in snap.get("offsets") or ():
        tp = (o["topic"], str(o["partition"]))
        if name == "kafka_consumergroup_group_offset":
            ow = owners.get((o["topic"], o["partition"]), NO_OWNER)
            yield (*tp, ow.member_host, ow.consumer_id, ow.client_id), o["offset"]
        elif o.get("commit_timestamp_ms") is not None:
            yield tp, o["commit_timestamp_ms"] / 1000


def _family(m: MetricDef) -> Metric:
    return Metric(m.family, m.help, m.type)


class SnapshotCollector:
    def __init__(self, metrics: MirrorMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        now_ms = int(time.time() * 1000)
        metrics = self.metrics
        c = metrics.cluster
        store = metrics.store
        snaps = [s for gid, _ in store.states() if (s := store.group(gid)) is not None]
        rows = [group_rows(s, now_ms, metrics.behind_ms) for s in snaps]
        for m in GROUP_METRICS:
            metric = _family(m)
            for snap, r in zip(snaps, rows, strict=True):
                for values, value in r[m.name]:
                    labels = dict(zip(m.labels, (c, snap["group_id"], *values), strict=True))
                    metric.samples.append(Sample(m.name, labels, value))
            yield metric
        for m in PARTITION_METRICS:
            metric = _family(m)
            for snap in snaps:
                if not metrics._wants_partitions(snap["group_id"]):
                    continue
                for values, pv in partition_rows(snap, m.name):
                    labels = dict(zip(m.labels, (c, snap["group_id"], *values), strict=True))
                    metric.samples.append(Sample(m.name, labels, pv))
            yield metric
        kinds = [
            SimpleNamespace(state=s.get("state") or "Unknown", kind=s.get("kind") or "unknown") for s in snaps
        ]
        mirror = metrics.mirror_samples(kinds)  # type: ignore[arg-type]
        for m in MIRROR_METRICS:
            metric = _family(m)
            if m.type == "histogram":
                for sname, labels, value in metrics.histogram_samples(m.name):
                    metric.samples.append(Sample(sname, labels, value))
            else:
                for values, value in mirror[m.name]:
                    metric.samples.append(Sample(m.name, dict(zip(m.labels, values, strict=True)), value))
            yield metric
        # the share families have one renderer (checked against Kafka in test_share_live.py)
        for provider in (*metrics.providers, metrics.share_samples):
            for m, samples in provider():
                metric = _family(m)
                for values, value in samples:
                    metric.samples.append(Sample(m.name, dict(zip(m.labels, values, strict=True)), value))
                yield metric


def registry_for(mirror: MirrorMetrics) -> CollectorRegistry:
    """A prometheus_client registry over the mirror's series, derived from the rendered snapshots."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(SnapshotCollector(mirror))
    return reg
