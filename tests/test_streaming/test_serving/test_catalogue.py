"""The one metric catalogue (`streaming.serving.catalogue`): names that follow Prometheus's
conventions, the sample names each family exposes, bounded label values, the group counters every
state keeps, and the metrics table of docs/monitoring.md it generates.  That the exporter writes
exactly the catalogue: test_metrics.py; the dashboards: tests/test_dashboards."""

from __future__ import annotations

import pytest

from state.model import COUNTERS
from streaming.serving.catalogue import (
    BY_NAME,
    CATALOGUE,
    GROUP_COUNTERS,
    SAMPLE_NAMES,
    MetricDef,
    metrics_table,
    reason_label,
    record_type_label,
)


def test_catalogue_names_follow_prometheus_conventions() -> None:
    names = [m.name for m in CATALOGUE]
    assert len(names) == len(set(names))
    for m in CATALOGUE:
        assert m.name.islower() and m.name.replace("_", "").isalnum(), m.name
        assert m.labels[0] == "cluster_name", m.name
        assert len(set(m.labels)) == len(m.labels), m.name
        assert m.help.endswith(".") and not m.help[0].islower(), m.name
        if m.type == "counter":
            assert m.name.endswith("_total"), m.name
        else:
            assert not m.name.endswith("_total"), m.name  # reserved for counters
            assert not m.name.endswith(("_sum", "_count", "_bucket")), m.name
        if m.unit:
            base = m.name.removesuffix("_total")
            assert base.endswith(f"_{m.unit}"), (m.name, m.unit)
        # no non-base units anywhere in a name
        for bad in ("_ms", "_millis", "_milliseconds", "_minutes", "_hours", "_kb", "_mb", "_percent"):
            assert bad + "_" not in m.name + "_", m.name
        if "timestamp" in m.name:
            assert m.name.endswith("_timestamp_seconds"), m.name
        if m.scope == "group":
            assert m.labels[:2] == ("cluster_name", "group") and m.name.startswith(
                "coordinator_mirror_group_"
            )
        if m.scope == "partition":
            assert m.labels[:4] == ("cluster_name", "group", "topic", "partition")
    # kafka-lag-exporter's names; lag comes from the log offsets the driver reads (scope "lag")
    assert "kafka_consumergroup_group_offset" in BY_NAME
    assert {
        m.scope for m in CATALOGUE if m.name.startswith("kafka_consumergroup_group_") and "lag" in m.name
    } == {"lag"}


def test_every_group_counter_is_a_state_counter() -> None:
    assert set(GROUP_COUNTERS) <= set(COUNTERS)
    for key in ("rebalances", "skipped_generations", "member_joins", "member_leaves", "emptied"):
        assert key in GROUP_COUNTERS


def test_reason_and_record_type_labels_are_bounded() -> None:
    assert reason_label("internal", "error") == "internal"
    assert reason_label("what on earth: 17 bytes", "error") == "none"  # only the closed set
    assert reason_label(None, "error") == "none"
    assert reason_label(None, "unknown") == "unknown_record_type"
    assert record_type_label(1) == "OFFSET_COMMIT" and record_type_label(23) != "23"
    assert record_type_label(123) == "123" and record_type_label(None) == "none"


@pytest.mark.parametrize(
    ("metric", "family", "samples"),
    [
        (MetricDef("x_total", "counter", "X.", ("cluster_name",)), "x", ("x_total",)),
        (MetricDef("x_seconds", "gauge", "X.", ("cluster_name",)), "x_seconds", ("x_seconds",)),
        (
            MetricDef("x_seconds", "histogram", "X.", ("cluster_name",)),
            "x_seconds",
            ("x_seconds_bucket", "x_seconds_sum", "x_seconds_count"),
        ),
    ],
)
def test_family_and_sample_names(metric: MetricDef, family: str, samples: tuple[str, ...]) -> None:
    assert metric.family == family and metric.sample_names == samples


def test_every_sample_name_leads_to_its_family() -> None:
    assert all(m in CATALOGUE for m in SAMPLE_NAMES.values())
    for m in CATALOGUE:
        assert all(SAMPLE_NAMES[s] is m for s in m.sample_names)


def test_the_metrics_table_has_a_row_per_family_with_pipes_escaped() -> None:
    table = metrics_table().splitlines()
    assert table[:2] == ["| name | type | labels | unit | scope | help |", "|---|---|---|---|---|---|"]
    assert len(table) == 2 + len(CATALOGUE)
    for line, m in zip(table[2:], CATALOGUE, strict=True):
        assert line.startswith(f"| `{m.name}` | {m.type} | `cluster_name`")
        assert line.count(" | ") == 5  # a "|" inside a help text does not add a column
