"""Prometheus exposition of the mirror (rendered at scrape time from the snapshot store)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily


class _MirrorCollector:
    def __init__(self, mirror: Any) -> None:
        self.mirror = mirror

    def collect(self) -> Any:
        cluster = self.mirror.settings.cluster_name
        store = self.mirror.store
        ready = GaugeMetricFamily("coordinator_mirror_ready", "1 once caught up", labels=["cluster_name"])
        ready.add_metric([cluster], 1.0 if store.readiness.ready else 0.0)
        yield ready
        groups = GaugeMetricFamily("coordinator_mirror_groups", "groups mirrored", labels=["cluster_name"])
        groups.add_metric([cluster], float(len(store)))
        yield groups
        records = CounterMetricFamily(
            "coordinator_mirror_records_read", "records read from __consumer_offsets", labels=["cluster_name"]
        )
        records.add_metric([cluster], float(self.mirror.observed.get("records", 0)))
        yield records


def registry_for(mirror: Any) -> CollectorRegistry:
    reg = getattr(mirror, "_registry", None)
    if reg is None:
        reg = CollectorRegistry(auto_describe=False)
        reg.register(_MirrorCollector(mirror))
        mirror._registry = reg
    return reg
