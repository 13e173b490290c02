"""The driver's share-group state (`streaming.serving.share`): what the share-state query's sink
applies per batch (a deleted share group removed), record counts once per batch id (a batch run again
after a restart is not counted twice), the share-partitions whose log end the lag reader samples
(named topics only), a group's ``share_state`` JSON with its lag against the sampled ends, and the
share metric families at a scrape."""

from __future__ import annotations

from typing import Any

from state.share import ACKNOWLEDGED, AVAILABLE, encode, fold, summary
from streaming.serving.catalogue import SHARE_METRICS
from streaming.serving.share import ShareStateStore, share_families, share_view
from tests.support.share import ShareLog

NAMES = {"TID": "orders"}


def _blob(*partitions: int) -> tuple[str, bytes, dict[str, Any]]:
    log = ShareLog()
    for p in partitions:
        log.snapshot(p, 10, (10, 11, ACKNOWLEDGED, 1), (12, 14, AVAILABLE, 2), dcc=2)
    g = fold(None, log.records, "sg")
    assert g is not None
    return "sg", encode(g), summary(g)


def test_apply_keeps_the_newest_bytes_and_drops_a_deleted_group() -> None:
    store = ShareStateStore()
    gid, blob, summ = _blob(0)
    store.apply(3, [(gid, blob, summ), ("gone", None, None)])
    assert len(store) == 1 and store.blob("sg") == blob and store.blob("gone") is None
    _, blob2, summ2 = _blob(0, 1)
    store.apply(4, [(gid, blob2, summ2)])
    assert store.states() == [("sg", blob2)] and store.last_batch_id == 4
    store.apply(5, [(gid, None, None)])
    assert len(store) == 0
    assert store.load([(gid, blob, summ)]) == 1 and store.blob("sg") == blob  # recovered at start


def test_counts_once_per_batch_id() -> None:
    store = ShareStateStore(max_errors=2)
    store.count(1, {"ok": 5, "error": 1}, [{"offset": 1}])
    store.count(1, {"ok": 5, "error": 1}, [{"offset": 1}])  # the batch run again after a restart
    store.count(2, {"unknown": 2}, [{"offset": 7}, {"offset": 8}])
    assert store.records == {"ok": 5, "error": 1, "unknown": 2}
    assert [e["offset"] for e in store.errors] == [7, 8]  # bounded: the oldest dropped


def test_the_share_partitions_whose_ends_the_lag_reader_samples() -> None:
    store = ShareStateStore()
    store.apply(1, [_blob(0, 2)])
    assert store.wanted(NAMES) == {("orders", 0), ("orders", 2)}
    assert store.wanted({}) == set()  # a topic id not named yet: nothing to read


def test_a_groups_share_state_json_and_its_lag() -> None:
    _, blob, _ = _blob(0, 1)
    view = share_view(blob, NAMES, {("orders", 0): 20})
    p0, p1 = view["partitions"]
    assert (p0["topic"], p0["topic_id"], p0["partition"]) == ("orders", "TID", 0)
    assert p0["lag"] == 20 - 10 - 2 and p1["lag"] is None  # no end sampled for partition 1
    assert view["lag"] == p0["lag"]
    assert [b["delivery_state"] for b in p0["state_batches"]] == ["acknowledged", "available"]
    unnamed = share_view(blob, {}, {})
    assert unnamed["partitions"][0]["topic"] == "TID" and unnamed["lag"] is None


def test_the_share_families_at_a_scrape() -> None:
    store = ShareStateStore()
    store.apply(1, [_blob(0)])
    store.count(1, {"ok": 3}, [])
    families = share_families(store, "east", lambda: NAMES, lambda: {("orders", 0): 20}, lambda gid: True)
    assert [m.name for m, _ in families] == [m.name for m in SHARE_METRICS]
    got = {m.name: samples for m, samples in families}
    assert got["coordinator_mirror_share_group_lag"] == [(("east", "sg"), 8)]
    assert got["coordinator_mirror_share_partition_lag"] == [(("east", "sg", "orders", "0"), 8)]
    assert (("east", "sg", "orders", "0", "acknowledged"), 2) in got[
        "coordinator_mirror_share_partition_records"
    ]
    assert ("east", "ok") in {k for k, _ in got["coordinator_mirror_share_state_records_total"]}
    without = dict(
        (m.name, s) for m, s in share_families(store, "east", lambda: NAMES, lambda: {}, lambda gid: False)
    )
    assert (
        without["coordinator_mirror_share_partition_lag"] == []
        and without["coordinator_mirror_share_group_lag"] == []
    )
