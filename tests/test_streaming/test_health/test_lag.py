"""`streaming.health.lag`: kafka-lag-exporter's lookup table (interpolation, extrapolation, flat
runs compressed, a sliding window), lag in messages and seconds; and who owns each partition of a
group -- per kind, and for a streams group by its tasks, read through the topology (found with three
real clusters: a streams group's task ``(subtopology "0", p)`` was taken for a topic named "0",
reported deleted, and the input topic's partitions had no owner)."""

from __future__ import annotations

import math

import pytest

from decoders.uuids import kafka_uuid
from lab.records import Log, tip
from state.model import Group
from state.replay import fold
from streaming.health.lag import (
    LagTracker,
    LogOffsets,
    LookupTable,
    PackedOffsets,
    group_owners,
    lag_messages,
    lag_seconds,
)
from tests.support.replay import committed_group


def _streams_group(topology: bool = True) -> Group:
    log = Log()
    if topology:
        log.streams_topology("app", 1, ["orders", "payments"])
    log.streams_member("app", "m1")
    log.streams_epoch("app", 1, 1)
    log.streams_current("app", "m1", 2, [0, 1])
    g = fold(None, log.records).group
    assert g is not None
    return g


def test_a_streams_task_owns_its_partition_of_each_source_topic() -> None:
    owners = group_owners(_streams_group())
    assert set(owners) == {("orders", 0), ("orders", 1), ("payments", 0), ("payments", 1)}
    assert {o.consumer_id for o in owners.values()} == {"m1"}
    assert {o.client_id for o in owners.values()} == {"client-m1"}


def test_without_its_topology_a_streams_group_owns_no_partition_rather_than_a_topic_0() -> None:
    assert group_owners(_streams_group(topology=False)) == {}


def test_wanted_follows_the_groups_and_the_names_a_round_brings() -> None:
    """The partitions a round reads: every group's committed and assigned ones, by name; an id no
    one names yet is left out until a round names it.  Kept between rounds while nothing changes
    (the same set), computed again as soon as a group or a topic name does."""
    tracker = LagTracker()
    tid = kafka_uuid(b"\xfb\xef\xbe" * 5 + b"\xff")  # Kafka's text of it holds "-" and "_"
    log = Log()
    log.k848_stable_group("k848/ü", {"m1": (["named-t"], [tip(tid, 0, 1)])})
    g848 = fold(None, log.records).group
    assert g848 is not None
    tracker.apply_groups([("a", committed_group("a", {("t", 0): 1, ("t", 1): 2})), ("k848/ü", g848)])
    first = tracker.wanted()
    assert first == {("t", 0), ("t", 1)}  # the assignment's id: no name yet
    assert tracker.wanted() is first  # nothing changed: not walked again
    tracker.apply_round(LogOffsets(1000, {}, {tid: "named-t"}))
    assert tracker.wanted() == {("t", 0), ("t", 1), ("named-t", 0), ("named-t", 1)}
    tracker.apply_groups([("b", committed_group("b", {("u", 3): 5}))])
    assert tracker.wanted() == {("t", 0), ("t", 1), ("named-t", 0), ("named-t", 1), ("u", 3)}
    tracker.apply_groups([("a", None)])
    assert tracker.wanted() == {("named-t", 0), ("named-t", 1), ("u", 3)}
    share = {("share-t", 0)}
    tracker.add_wanted(lambda: set(share))  # read again every round
    assert tracker.wanted() == {("named-t", 0), ("named-t", 1), ("u", 3), ("share-t", 0)}
    share.add(("share-t", 1))
    assert tracker.wanted() == {("named-t", 0), ("named-t", 1), ("u", 3), ("share-t", 0), ("share-t", 1)}


def test_lookup_table_follows_kafka_lag_exporter() -> None:
    t = LookupTable(limit=4)
    for offset, ms in [(100, 1000), (200, 2000), (200, 3000), (200, 4000), (300, 5000)]:
        t.add(offset, ms)
    # the flat run 200@2000..200@4000 is one segment (its right end moved out)
    assert t.points.tolist() == [100, 1000, 200, 2000, 200, 4000, 300, 5000]
    t.add(250, 6000)  # not monotonic: ignored
    t.add(400, 5000)  # out of order: ignored
    assert len(t) == 4
    assert t.predict_ms(150) == 1500  # interpolated
    assert t.predict_ms(250) == 4500
    assert t.predict_ms(50) == pytest.approx(1000 - 50 * 4000 / 200)  # extrapolated along the window
    assert lag_seconds(300, t, 7000) == 0.0  # at the newest end
    assert lag_seconds(150, t, 7000) == pytest.approx(5.5)
    assert math.isnan(lag_seconds(150, LookupTable(), 7000))
    flat = LookupTable()
    for ms in (1000, 2000, 3000):  # an idle topic sampled since 1000, end 200, consumer at 150
        flat.add(200, ms)
    assert flat.points.tolist() == [200, 1000, 200, 3000]
    assert lag_seconds(150, flat, 4000) == 3.0  # at least since the first sample, never ~0
    t.add(500, 7000)  # the window slides
    assert t.points.tolist()[:2] == [200, 2000]
    assert lag_messages(10, 5) == 0 and lag_messages(5, 10) == 5


@pytest.mark.parametrize("n", [0, 1, 3, 257])
def test_packed_offsets_is_the_mapping_it_replaces(n: int) -> None:
    """The lag view's offsets (`PackedOffsets`): the dict it replaced, item for item and in order --
    offsets and times across int64's whole range, topic names and ids alike."""
    want = {
        ((f"t-{i % 7}" if i % 2 else kafka_uuid(bytes([i % 256]) * 15 + b"\xff")), i): (
            (-1, 0) if i == 0 else (2**63 - 1 - i, i * 1_000_003)
        )
        for i in range(n)
    }
    packed = PackedOffsets(want.items())
    assert len(packed) == n and list(packed) == list(want) and list(packed.items()) == list(want.items())
    assert packed == want and dict(packed) == want
    for tp, v in want.items():
        assert tp in packed and packed[tp] == v and packed.get(tp) == v
    assert ("absent", 0) not in packed and packed.get(("absent", 0)) is None
    with pytest.raises(KeyError):
        packed[("absent", 0)]


def test_the_trackers_views_share_their_keys_and_pack_their_offsets() -> None:
    tracker = LagTracker()
    for i, gid in enumerate(("a", "b")):
        log = Log()
        log.commit(gid, "t", 0, 10 + i, commit_ts=500)
        log.commit(gid, "t", 1, 20 + i, commit_ts=600)
        tracker.apply_groups([(gid, fold(None, log.records, group_id=gid).group)])
    a, b = tracker.groups["a"].offsets, tracker.groups["b"].offsets
    assert isinstance(a, PackedOffsets) and dict(a) == {("t", 0): (10, 500), ("t", 1): (20, 600)}
    assert dict(b) == {("t", 0): (11, 500), ("t", 1): (21, 600)}
    assert all(x is y for x, y in zip(a, b, strict=True))  # one key tuple per partition, shared
