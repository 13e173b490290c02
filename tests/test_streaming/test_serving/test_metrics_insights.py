"""The insight series (issue 26) in the exposition: rebalance durations per group and as a
histogram, commit rhythm, abandoned offsets and their lag kept apart from the group's lag."""

from __future__ import annotations

import math

import pytest

from lab.synthetic import (
    abandoning_classic,
    exporter,
    feed_lag,
    settings,
    stable_classic,
    to_store_row,
    tracker_of,
)
from state import events as ev
from state.timing import phases
from streaming.pipeline.adapter import event_tally
from streaming.pipeline.sinks import batch_tallies
from streaming.serving.catalogue import REBALANCE_DURATION_BUCKETS
from streaming.serving.metrics import MirrorMetrics, exposition
from tests.support.exposition import parse, series, value


@pytest.fixture(scope="module")
def left() -> MirrorMetrics:
    groups = (abandoning_classic("left-g"), stable_classic("calm-g", 4))
    m = exporter(settings(commit_behind_s=30))
    m.store.apply(0, [to_store_row(g) for g in groups])
    feed_lag(m, groups)
    return m


def test_last_rebalance_per_phase(left: MirrorMetrics) -> None:
    s = parse(exposition(left)[0])
    snap = left.store.group("left-g")
    assert snap is not None
    last = snap["rebalance_timing"]["last"]
    assert last["started_ms"] is None and last["phases_ms"] == {"CompletingRebalance": 20}
    assert (
        value(
            s,
            "coordinator_mirror_group_rebalance_duration_seconds",
            group="left-g",
            phase="CompletingRebalance",
        )
        == 0.02
    )
    assert len(series(s, "coordinator_mirror_group_rebalance_duration_seconds", group="left-g")) == 1


def test_commit_rhythm(left: MirrorMetrics) -> None:
    s = parse(exposition(left)[0])
    # 12 commits of a.t and 12 of old.t, 5 s apart: one point per 5 s bucket; the old commits of
    # the abandoned topic do not count as a partition behind
    rate = value(s, "coordinator_mirror_group_commits_per_second", group="left-g")
    assert 0 < rate < 0.4  # 22 commits over the window, spread to now (the group is old)
    assert value(s, "coordinator_mirror_group_partitions_behind", group="left-g") == 0
    snap = left.store.group("left-g")
    assert snap is not None
    newest = max(o["commit_timestamp_ms"] for o in snap["offsets"] if o["topic"] == "a.t")
    assert (
        value(s, "coordinator_mirror_group_oldest_commit_timestamp_seconds", group="left-g") == newest / 1000
    )
    # calm-g committed its 4 partitions at once: nothing behind; a single commit point: no rate
    assert value(s, "coordinator_mirror_group_partitions_behind", group="calm-g") == 0
    assert not series(s, "coordinator_mirror_group_commits_per_second", group="calm-g")


def test_abandoned_offsets_and_their_lag_apart(left: MirrorMetrics) -> None:
    s = parse(exposition(left)[0])
    assert value(s, "coordinator_mirror_group_abandoned_offsets", group="left-g", topic="old.t") == 1
    snap = left.store.group("left-g")
    assert snap is not None
    expiry = snap["abandoned_topics"]["old.t"]["expires_at_ms"]
    assert expiry is not None
    assert (
        value(s, "coordinator_mirror_group_abandoned_expiry_timestamp_seconds", group="left-g", topic="old.t")
        == expiry / 1000
    )
    # the lag of old.t (end 2100 - committed 3) is reported apart, and nowhere in the group's lag
    assert value(s, "coordinator_mirror_group_abandoned_lag", group="left-g", topic="old.t") == 2097
    assert not series(s, "kafka_consumergroup_group_lag", group="left-g", topic="old.t")
    assert value(s, "kafka_consumergroup_group_max_lag", group="left-g") == 2100 - 21
    assert value(s, "kafka_consumergroup_group_sum_lag", group="left-g") == 2100 - 21
    assert not series(s, "kafka_consumergroup_group_topic_sum_lag", group="left-g", topic="old.t")
    rows = tracker_of(left)[0].group_lag("left-g")
    assert rows is not None and {(r.topic, r.abandoned) for r in rows} == {("a.t", False), ("old.t", True)}
    assert not series(s, "coordinator_mirror_group_abandoned_offsets", group="calm-g")


def test_the_rebalance_histogram_from_timed_events() -> None:
    events = [
        ev.RebalanceTimed(
            "a", 0, 1, 1, kind="classic", generation=1, started_ms=0, assigned_ms=700, stable_ms=900
        ),
        ev.RebalanceTimed("b", 0, 2, 2, kind="classic", generation=5, assigned_ms=100, stable_ms=30_100),
        ev.RebalanceTimed(
            "c", 0, 3, 3, kind="consumer", generation=3, started_ms=0, assigned_ms=0, stable_ms=2_000
        ),
    ]
    m = exporter(settings())
    m.status.add_tallies(batch_tallies([event_tally(e) for e in events], []))
    s = parse(exposition(m)[0])
    name = "coordinator_mirror_rebalance_duration_seconds"
    assert value(s, f"{name}_count", kind="classic", phase="CompletingRebalance") == 2
    assert value(s, f"{name}_sum", kind="classic", phase="CompletingRebalance") == pytest.approx(30.2)
    assert value(s, f"{name}_bucket", kind="classic", phase="CompletingRebalance", le="0.25") == 1
    assert value(s, f"{name}_bucket", kind="classic", phase="CompletingRebalance", le="30.0") == 2
    assert value(s, f"{name}_bucket", kind="classic", phase="CompletingRebalance", le="+Inf") == 2
    assert value(s, f"{name}_count", kind="classic", phase="total") == 1
    assert value(s, f"{name}_count", kind="consumer", phase="Reconciling") == 1
    assert value(s, f"{name}_bucket", kind="consumer", phase="Assigning", le="0.1") == 1
    # cumulative buckets, one series per bound
    buckets = series(s, f"{name}_bucket", kind="consumer", phase="total")
    assert len(buckets) == len(REBALANCE_DURATION_BUCKETS) + 1
    assert value(s, "coordinator_mirror_events_total", type="rebalance_timed") == 3
    assert math.isclose(sum(ms for _, ms in phases("consumer", 0, 0, 2_000)) / 1000, 4.0)
