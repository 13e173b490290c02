"""What issue 38 adds to ``GET /groups/{id}/lag`` and the lag metrics (`streaming.serving.lag_view`),
pure: the fixed ``catch_up`` shape per partition and for the group, log start, retention margin and
records lost; the same figures as series; a share group's rows from its share state (not yet
checked against Kafka's listShareGroupOffsets on a live broker)."""

from __future__ import annotations

from typing import Any

from lab.records import Log
from lab.synthetic import exporter, feed_lag, kip848, settings, stable_classic, tracker_of
from state import share
from state.replay import fold
from state.share import ACKNOWLEDGED, AVAILABLE
from streaming.health.catch_up import STATES
from streaming.health.lag import LogOffsets, PartitionEnds
from streaming.health.retention import Margin
from streaming.serving import lag_view
from streaming.serving.burrow import lag_route
from streaming.serving.share import ShareStateStore
from tests.support.exposition import parse
from tests.support.share import ShareLog

CATCH_UP_KEYS = {"state", "seconds", "consume_rate", "produce_rate"}


def _mirror() -> Any:
    m = exporter(settings())
    feed_lag(m, [stable_classic("fast", 4), kip848("slow/ü", 4)], moving=True)
    return m


def test_lag_body_carries_catch_up_and_retention() -> None:
    m = _mirror()
    tracker, burrow = tracker_of(m)
    retention = m.lag.retention
    bodies = {}
    for gid in ("fast", "slow/ü"):
        status, body = lag_route(
            tracker, burrow, f"/groups/{gid.replace('/', '%2F')}/lag", 0, retention=retention
        ) or (0, {})
        assert status == 200, body
        bodies[gid] = body
        assert set(body["catch_up"]) == CATCH_UP_KEYS and body["catch_up"]["state"] in STATES
        for x in body["partitions"]:
            assert set(x["catch_up"]) == CATCH_UP_KEYS
            assert x["log_start_offset"] is not None and x["records_lost"] >= 0
    fast = bodies["fast"]
    assert fast["catch_up"]["state"] in ("catching_up", "caught_up")
    assert fast["catch_up"]["seconds"] == max(x["catch_up"]["seconds"] for x in fast["partitions"])
    assert fast["catch_up"]["consume_rate"] == sum(x["catch_up"]["consume_rate"] for x in fast["partitions"])
    slow = bodies["slow/ü"]
    assert slow["catch_up"]["state"] == "falling_behind" and slow["catch_up"]["seconds"] is None
    closing = [x for x in slow["partitions"] if x["retention_margin"]["seconds"] is not None]
    assert closing and slow["retention_margin"]["seconds"] == min(
        x["retention_margin"]["seconds"] for x in closing
    )
    # feed_lag's second round moved one partition's log start past its committed offset
    lost = [x for b in bodies.values() for x in b["partitions"] if x["records_lost"]]
    assert (
        len(lost) == 1
        and lost[0]["records_lost"] == lost[0]["log_start_offset"] - lost[0]["committed_offset"]
    )


def test_the_series_say_what_the_body_says() -> None:
    m = _mirror()
    tracker, burrow = tracker_of(m)
    samples = parse(m.lag.exposition())
    for gid in ("fast", "slow/ü"):
        _, body = lag_route(
            tracker, burrow, f"/groups/{gid.replace('/', '%2F')}/lag", 0, retention=m.lag.retention
        ) or (0, {})
        labels = (("cluster_name", "synthetic"), ("group", gid))
        states = {
            dict(k[1])["state"]: v
            for k, v in samples.items()
            if k[0] == "coordinator_mirror_group_catch_up_state" and set(labels) <= set(k[1])
        }
        assert states == {s: float(s == body["catch_up"]["state"]) for s in STATES}
        secs = samples.get(("coordinator_mirror_group_catch_up_seconds", labels))
        assert secs == body["catch_up"]["seconds"]
        assert samples[("coordinator_mirror_group_records_lost_total", labels)] == body["records_lost"]


def test_the_groups_margin_is_the_nearest_partitions() -> None:
    """Fewest records and fewest seconds, each over the partitions that have one: a partition
    whose gap is not closing (seconds None) still counts for records, never for seconds."""
    assert lag_view.group_margin([]) is None and lag_view.group_margin([None, None]) is None
    found = [Margin(500, None), None, Margin(900, 30.0), Margin(2_000, 12.5)]
    assert lag_view.group_margin(found) == Margin(500, 12.5)
    assert lag_view.group_margin([Margin(7, None)]) == Margin(7, None)


def test_a_share_groups_rows_are_its_share_partitions_with_kafkas_lag() -> None:
    """A share group's ``/lag`` rows are its share-partitions: the start offset as the committed
    offset, lag = high watermark - start offset - delivery complete count (Kafka's share lag) --
    every initialised share-partition, the group empty or not."""
    log = Log()
    log.share_member("sg", "m", ["share-t"])
    log.share_state("sg", {"TID": "share-t"})
    group = fold(None, log.records).group
    assert group is not None
    m = exporter(settings())
    tracker, burrow = tracker_of(m)
    tracker.apply_groups([("sg", group)])
    writes = ShareLog()
    writes.snapshot(0, 100, (100, 109, ACKNOWLEDGED, 1), (110, 119, AVAILABLE, 1))  # 10 done in state
    writes.snapshot(1, 40, dcc=5)  # the broker's own complete count
    writes.snapshot(2, 0)
    state = share.fold(None, writes.records, "sg")
    store = ShareStateStore()
    store.apply(0, [("sg", share.encode(state), share.summary(state))])
    ends = {("share-t", p): PartitionEnds(0, 150, 150) for p in range(3)}
    tracker.apply_round(LogOffsets(1_800_000_000_000, ends, {"TID": "share-t"}))
    status, body = lag_route(tracker, burrow, "/groups/sg/lag", 0, share=store) or (0, {})
    assert status == 200, body
    got = [(x["topic"], x["partition"], x["committed_offset"], x["lag"]) for x in body["partitions"]]
    assert got == [("share-t", 0, 100, 40), ("share-t", 1, 40, 105), ("share-t", 2, 0, 150)]
    # the group's member gone: the same rows (Kafka keeps the share-partitions' state)
    log.share_member("sg", "m", None)
    left = fold(group.copy(), log.records[-1:]).group
    tracker.apply_groups([("sg", left)])
    _, again = lag_route(tracker, burrow, "/groups/sg/lag", 0, share=store) or (0, {})
    assert [(x["partition"], x["lag"]) for x in again["partitions"]] == [(0, 40), (1, 105), (2, 150)]
