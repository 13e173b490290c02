"""The exporter: exposition format, catalogue agreement, per-group values, cardinality switches.

Stores are filled with real groups (typed records folded by `state`, applied as state bytes), rendered
both ways -- `exposition` (from numbers decoded out of the state bytes) and prometheus_client's
`generate_latest` over the oracle's `registry_for` (from the rendered snapshots) -- and read back with
prometheus_client's parser.
"""

from __future__ import annotations

import json
from collections import namedtuple
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from lab.metrics_oracle import registry_for
from lab.records import HOUR, MIN, Log, cm
from lab.synthetic import (
    RENDERER,
    abandoning_classic,
    add_progress,
    empty_classic,
    exporter,
    feed_lag,
    filled_store,
    kip848,
    settings,
    stable_classic,
    to_store_row,
    tracker_of,
)
from state import codec
from state import events as ev
from state.replay import fold
from streaming.pipeline.adapter import event_tally
from streaming.pipeline.sinks import MirrorSink
from streaming.serving.catalogue import (
    CATALOGUE,
    GROUP_COUNTERS,
    GROUP_STATES,
    SAMPLE_NAMES,
    MetricDef,
)
from streaming.serving.metrics import MirrorMetrics, exposition
from tests.support.exposition import parse, series, value


def mirror_with(*groups: Any, **overrides: Any) -> MirrorMetrics:
    m = exporter(settings(**overrides))
    m.store.apply(0, [to_store_row(g) for g in groups])
    feed_lag(m, groups)
    return m


# ------------------------------------------------------------------------------ the exposition
@pytest.fixture(scope="module")
def mixed() -> MirrorMetrics:
    weird = stable_classic('we"ird\\grp\nü', 3)
    groups = (
        stable_classic("stable-g", 6),
        empty_classic("empty-g", 4, HOUR),
        kip848("k-g", 4),
        weird,
        abandoning_classic("left-g"),
    )
    m = exporter(settings())
    m.store.apply(0, [to_store_row(g) for g in groups])
    # empty-g's topic: the deleted-topic series; one of stable-g's the mirror may not read
    feed_lag(m, groups, deleted_topics={"e"}, denied_topics={"stable-g.t1"}, moving=True)
    m.run.add_observed(
        {
            "records": 120,
            "rows": 60,
            "commits": 90,
            "offset_tombstones": 3,
            "errors": 2,
            "unknown": 1,
            "type_1": 93,
            "type_1_v3": 80,
            "type_1_v4": 10,
            "type_2": 20,
            "type_2_v3": 20,
            "type_5": 4,
        }
    )
    add_progress(m, 0, 100, 1500, addBatch=1200, queryPlanning=100)
    add_progress(m, 1, 20, 300, addBatch=200)
    m.status.set_targets({}, {0: 100, 1: 50})
    m.status.advance({0: 90, 1: 50}, {0: 110, 1: 50})
    return m


def test_both_renderers_parse_and_agree_sample_for_sample(mixed: MirrorMetrics) -> None:
    # the lag families have one renderer (`streaming.serving.lag_metrics`): compared to the catalogue below
    lag = {m.name for m in CATALOGUE if m.scope == "lag"}
    fast = {k: v for k, v in parse(exposition(mixed)[0]).items() if k[0] not in lag}
    slow = parse(generate_latest(registry_for(mixed)))
    assert set(fast) == set(slow)
    volatile = {"coordinator_mirror_exporter_render_seconds", "coordinator_mirror_exporter_series"}
    assert {k: v for k, v in fast.items() if k[0] not in volatile} == pytest.approx(
        {k: v for k, v in slow.items() if k[0] not in volatile}, rel=1e-6
    )
    # the series counter tells the size of the previous exposition, the lag families included
    everything = parse(exposition(mixed)[0])
    assert {k[0] for k in everything} & lag, "the fixture exports lag series"
    assert value(parse(exposition(mixed)[0]), "coordinator_mirror_exporter_series") == len(everything)
    assert not set(slow) & {k for k in parse(exposition(mixed)[0]) if k[0] in lag}


def test_exposition_matches_the_catalogue(mixed: MirrorMetrics) -> None:
    body, content_type = exposition(mixed)
    assert content_type.startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    for m in CATALOGUE:
        fam = families.get(m.family)
        assert fam is not None, f"{m.name} missing from the exposition"
        assert fam.type == m.type and fam.documentation == m.help, m.name
        if m.scope == "lag":  # the fake mirror feeds every lag family
            assert fam.samples, f"{m.name} has no samples"
    for (name, labels), _ in parse(body).items():
        m = SAMPLE_NAMES.get(name)
        assert m is not None, f"{name} is not in the catalogue"
        names = {k for k, _ in labels} - ({"le"} if m.type == "histogram" else set())
        assert names == set(m.labels), (name, labels)
        assert dict(labels)["cluster_name"] == "synthetic"


def test_per_group_values(mixed: MirrorMetrics) -> None:
    s = parse(exposition(mixed)[0])
    snap = mixed.store.group("stable-g")
    assert snap is not None
    assert value(s, "coordinator_mirror_group_state", group="stable-g", state="Stable") == 1
    assert value(s, "coordinator_mirror_group_state", group="stable-g", state="Empty") == 0
    assert len(series(s, "coordinator_mirror_group_state", group="stable-g")) == len(GROUP_STATES["classic"])
    assert len(series(s, "coordinator_mirror_group_state", group="k-g")) == len(GROUP_STATES["consumer"])
    assert value(s, "coordinator_mirror_group_state", group="empty-g", state="Empty") == 1
    info = series(s, "coordinator_mirror_group_info", group="stable-g")
    assert dict(next(iter(info))[1]) == {
        "cluster_name": "synthetic",
        "group": "stable-g",
        "kind": "classic",
        "type": "Classic",
        "protocol_type": "consumer",
        "protocol": "cooperative-sticky",
    }
    assert (
        dict(next(iter(series(s, "coordinator_mirror_group_info", group="k-g")))[1])["protocol"] == "uniform"
    )
    assert value(s, "coordinator_mirror_group_epoch", group="stable-g") == snap["generation"] == 3
    assert value(s, "coordinator_mirror_group_epoch", group="k-g") == 1  # group epoch
    assert value(s, "coordinator_mirror_group_assignment_epoch", group="k-g") == 1
    assert not series(s, "coordinator_mirror_group_assignment_epoch", group="stable-g")  # classic: none
    assert value(s, "coordinator_mirror_group_members", group="stable-g") == 2
    assert value(s, "coordinator_mirror_group_offsets", group="stable-g") == 6
    for key, (name, _) in GROUP_COUNTERS.items():
        assert value(s, name, group="stable-g") == snap["counters"][key], name
    assert value(s, "coordinator_mirror_group_rebalances_total", group="stable-g") == 3
    assert value(s, "coordinator_mirror_group_last_rebalance_timestamp_seconds", group="stable-g") == (
        snap["last_rebalance_ms"] / 1000
    )
    assert value(s, "coordinator_mirror_group_last_commit_timestamp_seconds", group="stable-g") == (
        max(o["commit_timestamp_ms"] for o in snap["offsets"]) / 1000
    )
    assert value(s, "coordinator_mirror_group_state_since_timestamp_seconds", group="empty-g") == (
        mixed.store.group("empty-g")["state_since_ms"] / 1000  # type: ignore[index]
    )
    # a Stable group's subscribed topics never expire: no countdown; the Empty group's do
    assert not series(s, "coordinator_mirror_group_next_offset_expiry_seconds", group="stable-g")
    assert value(s, "coordinator_mirror_group_next_offset_expiry_seconds", group="empty-g") > 0
    # committed offsets per partition, kafka-lag-exporter's name and labels; this classic group's
    # members carry no assignment, so no partition has an owner
    unknown = {"member_host": "unknown", "consumer_id": "unknown", "client_id": "unknown"}
    for o in snap["offsets"]:
        labels = {"group": "stable-g", "topic": o["topic"], "partition": str(o["partition"])}
        assert value(s, "kafka_consumergroup_group_offset", **labels, **unknown) == o["offset"]
        assert value(s, "kafka_consumergroup_group_commit_timestamp_seconds", **labels) == (
            o["commit_timestamp_ms"] / 1000
        )


def test_committed_offsets_carry_the_owner_of_the_partition(mixed: MirrorMetrics) -> None:
    """kafka-lag-exporter's owner labels on kafka_consumergroup_group_offset (its
    groupPartitionLabels), from the assignment in the log: KIP-848 members m1 (0, 2), m2 (1);
    partition 3 is committed but not assigned.  Same in both renderers, same as the lag series."""
    snap = mixed.store.group("k-g")
    assert snap is not None
    members = {m["member_id"]: m for m in snap["members"]}
    expected = {"0": "m1", "1": "m2", "2": "m1", "3": None}
    for body in (exposition(mixed)[0], generate_latest(registry_for(mixed))):
        s = parse(body)
        for partition, member in expected.items():
            (key,) = series(s, "kafka_consumergroup_group_offset", group="k-g", partition=partition)
            labels = dict(key[1])
            m = members.get(member or "")
            assert labels["consumer_id"] == (member or "unknown")
            assert labels["member_host"] == ((m and m["client_host"]) or "unknown")
            assert labels["client_id"] == ((m and m["client_id"]) or "unknown")
            assert labels["topic"] == "k.t"
        lag_owner = {k: v for k, v in labels.items() if k in ("member_host", "consumer_id", "client_id")}
    s = parse(exposition(mixed)[0])
    assert series(s, "kafka_consumergroup_group_lag", group="k-g", partition="3", **lag_owner)


def test_any_group_id_survives_escaping(mixed: MirrorMetrics) -> None:
    for body in (exposition(mixed)[0], generate_latest(registry_for(mixed))):
        s = parse(body)
        assert value(s, "coordinator_mirror_group_members", group='we"ird\\grp\nü') == 2


def test_mirror_level_values(mixed: MirrorMetrics) -> None:
    s = parse(exposition(mixed)[0])
    assert value(s, "coordinator_mirror_records_read_total") == 120
    assert value(s, "coordinator_mirror_records_total", record_type="OFFSET_COMMIT", value_version="3") == 80
    assert (
        value(s, "coordinator_mirror_records_total", record_type="OFFSET_COMMIT", value_version="other") == 3
    )
    assert value(s, "coordinator_mirror_records_total", record_type="GROUP_METADATA", value_version="3") == 20
    assert not series(
        s, "coordinator_mirror_records_total", record_type="GROUP_METADATA", value_version="other"
    )
    assert (
        value(
            s,
            "coordinator_mirror_records_total",
            record_type="CONSUMER_GROUP_MEMBER_METADATA",
            value_version="other",
        )
        == 4
    )
    assert value(s, "coordinator_mirror_decode_errors_total") == 2
    assert value(s, "coordinator_mirror_unknown_records_total") == 1
    assert value(s, "coordinator_mirror_partition_records_behind", partition="0") == 20
    assert value(s, "coordinator_mirror_partition_records_behind", partition="1") == 0
    assert value(s, "coordinator_mirror_records_behind") == 20
    assert value(s, "coordinator_mirror_ready") == 0
    assert value(s, "coordinator_mirror_query_healthy") == 1
    assert value(s, "coordinator_mirror_groups", state="Stable", kind="classic") == 3  # left-g too
    assert value(s, "coordinator_mirror_groups", state="Empty", kind="classic") == 1
    assert value(s, "coordinator_mirror_groups", state="Stable", kind="consumer") == 1
    assert value(s, "coordinator_mirror_batches_total") == 2
    assert value(s, "coordinator_mirror_input_rows_total") == 120
    assert value(s, "coordinator_mirror_batch_input_rows") == 20
    assert value(s, "coordinator_mirror_batch_duration_seconds_count") == 2
    assert value(s, "coordinator_mirror_batch_duration_seconds_sum") == pytest.approx(1.8)
    assert value(s, "coordinator_mirror_batch_duration_seconds_bucket", le="0.5") == 1
    assert value(s, "coordinator_mirror_batch_duration_seconds_bucket", le="2.5") == 2
    assert value(s, "coordinator_mirror_batch_duration_seconds_bucket", le="+Inf") == 2
    assert value(s, "coordinator_mirror_batch_phase_seconds_total", phase="addBatch") == pytest.approx(1.4)
    assert value(s, "coordinator_mirror_state_rows") == 5
    # the event counters exist from the start (so increase() sees the first occurrence)
    assert value(s, "coordinator_mirror_events_total", type="rebalance_completed") == 0
    assert value(s, "coordinator_mirror_offsets_expired_total", origin="mirror") == 0
    assert value(s, "coordinator_mirror_groups_deleted_total", reason="expired") == 0


def test_a_failing_health_check_reads_as_an_unhealthy_query() -> None:
    m = mirror_with(stable_classic("g", 1))

    def broken() -> bool:
        raise ConnectionError("py4j gateway is gone")

    m.run.query_running = broken
    assert value(parse(exposition(m)[0]), "coordinator_mirror_query_healthy") == 0


def test_families_from_another_module_follow_the_mirrors_own() -> None:
    """`MirrorMetrics.providers`: another module's families, asked at every scrape."""
    m = mirror_with(stable_classic("g", 1))
    lag = MetricDef("test_partition_lag", "gauge", "Lag.", ("cluster_name", "group", "topic"), scope="group")
    calls: list[int] = []

    def provider() -> list[tuple[MetricDef, list[tuple[tuple[str, ...], float]]]]:
        calls.append(1)
        return [(lag, [(("synthetic", 'g"1', "t"), 5.0), (("synthetic", "g2", "t"), 7.5)])]

    m.providers.append(provider)
    for body in (exposition(m)[0], generate_latest(registry_for(m))):
        s = parse(body)
        assert value(s, "test_partition_lag", group='g"1', topic="t") == 5
        assert value(s, "test_partition_lag", group="g2") == 7.5
    assert len(calls) == 2
    text = exposition(m)[0].decode()
    assert text.index("# TYPE test_partition_lag gauge") > text.index("coordinator_mirror_exporter_series")


def test_progress_is_folded_once_per_batch() -> None:
    m = mirror_with(stable_classic("g", 1))
    add_progress(m, 5, 10, 100)
    exposition(m)
    exposition(m)  # the same history again: nothing new
    add_progress(m, 6, 7, 100)
    s = parse(exposition(m)[0])
    assert value(s, "coordinator_mirror_batches_total") == 2
    assert value(s, "coordinator_mirror_input_rows_total") == 17


# ------------------------------------------------------------------------------ cardinality
def test_per_partition_series_switch_off() -> None:
    m = mirror_with(stable_classic("a", 5), stable_classic("b", 5), metrics_per_partition=False)
    for body in (exposition(m)[0], generate_latest(registry_for(m))):
        s = parse(body)
        assert not series(s, "kafka_consumergroup_group_offset")
        assert not series(s, "kafka_consumergroup_group_commit_timestamp_seconds")
        assert value(s, "coordinator_mirror_group_offsets", group="a") == 5  # the per-group count stays


def test_per_partition_series_filtered_by_group_regex() -> None:
    groups = [stable_classic(g, 3) for g in ("payments-etl", "payments-audit", "search-indexer")]
    m = mirror_with(*groups, metrics_group_regex="^payments-")
    for body in (exposition(m)[0], generate_latest(registry_for(m))):
        s = parse(body)
        with_partitions = {dict(k[1])["group"] for k in series(s, "kafka_consumergroup_group_offset")}
        assert with_partitions == {"payments-etl", "payments-audit"}
        assert len(series(s, "kafka_consumergroup_group_offset")) == 6
        assert len(series(s, "coordinator_mirror_group_members")) == 3  # per-group series for every group


def test_deleted_groups_series_disappear_and_a_recreated_group_starts_over() -> None:
    m = mirror_with(stable_classic("stays", 2), stable_classic("goes", 2))
    s = parse(exposition(m)[0])
    assert series(s, "coordinator_mirror_group_rebalances_total", group="goes")
    m.store.apply(1, [("goes", None, None)])  # what the sink applies for a deleted group
    lag, burrow = tracker_of(m)
    burrow.history.record(lag.apply_groups([("goes", None)]), lag)  # and its lag hook
    for body in (exposition(m)[0], generate_latest(registry_for(m))):
        s = parse(body)
        assert not [k for k in s if dict(k[1]).get("group") == "goes"]
        assert series(s, "coordinator_mirror_group_rebalances_total", group="stays")
    assert set(m._views) == {"stays"}  # nothing kept for the deleted group
    fresh = stable_classic("goes", 2, generation=1)
    m.store.apply(2, [to_store_row(fresh)])
    s = parse(exposition(m)[0])
    assert value(s, "coordinator_mirror_group_rebalances_total", group="goes") == 1


def test_views_are_reused_while_the_state_bytes_are_unchanged() -> None:
    m = mirror_with(stable_classic("a", 2), stable_classic("b", 2))
    exposition(m)
    before = dict(m._views)
    m.store.apply(1, [to_store_row(stable_classic("b", 3))])
    exposition(m)
    after = m._views
    assert after["a"] is before["a"] and after["b"] is not before["b"]


# ------------------------------------------------------------------------------ the sink's tallies
def _event_json(e: ev.Event) -> str:
    return json.dumps(e.to_json(), separators=(",", ":"), ensure_ascii=False)  # as the adapter writes


Row = namedtuple("Row", "group_id kind key body summary blob")


def test_the_sink_feeds_the_mirror_level_counters() -> None:
    """`MirrorSink._apply` (what foreachBatch runs per batch) -> store tallies -> exposition."""
    log = Log()
    log.classic("g", 1, [cm("a")])
    log.tick(MIN).classic("g", 2, [cm("a"), cm("b")])
    res = fold(None, log.records)
    assert res.group is not None
    _, blob, summ = to_store_row(res.group)
    # a snapshot row as the adapter sends it: the summary, and the state bytes to render on read
    rows = [Row("g", "snapshot", None, None, json.dumps(summ), blob)]
    # event rows: the JSON for the outputs, the tally for the counters
    rows += [Row("g", "event", "k", _event_json(e), event_tally(e), None) for e in res.events]
    rows.append(
        Row(
            None,
            "error",
            None,
            json.dumps({"status": "unknown", "record_type": 42, "group_id": None}),
            None,
            None,
        )
    )
    m = exporter(settings())
    MirrorSink(settings(), m.store, m.status, None)._apply(7, rows)  # type: ignore[arg-type]
    s = parse(exposition(m)[0])
    assert value(s, "coordinator_mirror_events_total", type="rebalance_completed") == 2
    assert value(s, "coordinator_mirror_events_total", type="member_joined") == 2
    assert value(s, "coordinator_mirror_skipped_records_total", status="unknown", record_type="42") == 1
    assert value(s, "coordinator_mirror_group_rebalances_total", group="g") == 2
    assert m.store.group("g") == RENDERER(codec.encode(res.group))  # rendered from the bytes


def test_scrape_of_a_large_store_is_cheap() -> None:
    """2k groups x 20 partitions (~90k series): a full render well under a second, a repeat
    (no group changed) several times cheaper.  bench/series.py measures 10k x 50."""
    import time

    m = exporter(settings(), filled_store(2000, 20))
    t0 = time.perf_counter()
    body, _ = exposition(m)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    exposition(m)
    again = time.perf_counter() - t0
    assert m.last_series > 80_000
    assert body.count(b"\n") > 80_000
    assert first < 5.0 and again < first, (first, again)
