"""The lag and consumer-health families (`streaming.serving.lag_metrics.LagExporter`), read back by
prometheus_client's parser: one header per family of `LAG_METRICS` in its order, each group's lag
(max, sum, per topic, in seconds) with a topic its members left apart, the round's partition
offsets, Burrow's statuses; the per-partition switches; the text rendered once per tracker version
and served from that cache in between."""

from __future__ import annotations

from typing import Any

from lab.synthetic import abandoning_classic, exporter, feed_lag, settings, stable_classic
from streaming.serving.catalogue import LAG_METRICS
from streaming.serving.lag_metrics import LagExporter
from tests.support.exposition import parse, series, value


def _lag(groups: list[Any], **overrides: Any) -> LagExporter:
    m = exporter(settings(cluster_name="east", **overrides))
    feed_lag(m, groups)
    lag = m.lag
    assert isinstance(lag, LagExporter)
    return lag


def test_every_family_once_in_catalogue_order() -> None:
    text = _lag([stable_classic("g", 4)]).exposition()
    helps = [line.split()[2] for line in text.decode().splitlines() if line.startswith("# HELP")]
    assert helps == [m.name for m in LAG_METRICS]
    assert all(dict(k[1])["cluster_name"] == "east" for k in parse(text))


def test_a_groups_lag_and_its_partitions() -> None:
    g = stable_classic('g/"ü"', 4, topics=2)  # committed 1000..1003; every end at 2100 after feed_lag
    s = parse(_lag([g]).exposition())
    lags = series(s, "kafka_consumergroup_group_lag", group=g.group_id)
    assert sorted(lags.values()) == sorted(2100.0 - e[0] for e in g.offsets.values())
    assert value(s, "kafka_consumergroup_group_max_lag", group=g.group_id) == max(lags.values())
    assert value(s, "kafka_consumergroup_group_sum_lag", group=g.group_id) == sum(lags.values())
    per_topic = series(s, "kafka_consumergroup_group_topic_sum_lag", group=g.group_id)
    assert sum(per_topic.values()) == sum(lags.values()) and len(per_topic) == 2
    assert (
        value(s, "coordinator_mirror_group_lag_slo_seconds", group=g.group_id) == settings().lag_slo_seconds
    )
    assert len(series(s, "kafka_partition_latest_offset")) == 4
    assert series(s, "coordinator_mirror_consumer_status", group=g.group_id)  # Burrow evaluated it


def test_a_topic_the_members_left_is_lag_apart() -> None:
    g = abandoning_classic("ab")
    s = parse(_lag([g]).exposition())
    abandoned = series(s, "coordinator_mirror_group_abandoned_lag", group="ab")
    assert [dict(k[1])["topic"] for k in abandoned] == ["old.t"]
    topics = {dict(k[1])["topic"] for k in series(s, "kafka_consumergroup_group_topic_sum_lag", group="ab")}
    assert topics == {"a.t"}  # the group's own lag without the topic it left


def test_the_per_partition_switches() -> None:
    groups = [stable_classic("keep-1", 2), stable_classic("drop-1", 2)]
    off = parse(_lag(groups, metrics_per_partition=False).exposition())
    assert not series(off, "kafka_consumergroup_group_lag")
    assert series(off, "kafka_consumergroup_group_max_lag", group="drop-1")  # the group's own stay
    some = parse(_lag(groups, metrics_group_regex="^keep-").exposition())
    assert {dict(k[1])["group"] for k in series(some, "kafka_consumergroup_group_lag")} == {"keep-1"}


def test_rendered_once_per_tracker_version() -> None:
    lag = _lag([stable_classic("g", 2)])
    first = lag.exposition()
    assert lag.exposition() is first  # nothing changed: the cached text itself
    assert lag.last_series > 0
    lag.tracker.apply_groups([("h", stable_classic("h", 1))])
    again = lag.exposition()
    assert again is not first and b'group="h"' in again


def test_the_text_is_not_kept_past_the_next_round() -> None:
    """A round changes what the next scrape renders anyway, so the last text is dropped then (at
    10k groups x 50 it is ~330 MB the driver would hold between scrapes)."""
    from streaming.health.lag import LogOffsets

    lag = _lag([stable_classic("g", 2)])
    lag.exposition()
    assert lag._cached is not None
    r = lag.tracker.round
    assert r is not None
    lag.tracker.apply_round(LogOffsets(r.sampled_at_ms + 1000, r.partitions))
    assert lag._cached is None  # nothing holds the text any more
    assert b'group="g"' in lag.exposition()
