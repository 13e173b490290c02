"""The ``__share_group_state`` query's parts (`streaming.pipeline.share_state`), without a broker:
its executor functions over the real records of a 4.3.1 broker (tests/vectors) -- rows packed per
share group, folded into `state.share` bytes equal to the share fold's own, a group deleted,
undecodable records reported and counted --; its sink on the shared Spark session; when the
supervisor may start it and why not; its wiring (the lag reader's share-partitions, a group's
``share_state``).  Running against a broker: tests/test_live/test_share_live.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgpack
import pyarrow as pa
import pytest

from decoders import decode_share_state_record
from decoders.records import DecodeError, Source
from lab.synthetic import settings
from state import share
from streaming.health.lag import LagTracker, LogOffsets, PartitionEnds
from streaming.pipeline.share_state import (
    OUTPUT_DDL,
    TOPIC,
    ShareSink,
    ShareStateQuery,
    checkpoint_of,
    fold_share,
    pack_rows,
    share_view_of,
    wanted_by,
)
from streaming.serving.share import ShareStateStore
from streaming.serving.store import SnapshotStore
from tests.support.group_state import FakeGroupState

VECTORS = json.loads(
    (Path(__file__).resolve().parents[2] / "vectors" / "kafka-4.3.1-share-state.json").read_text()
)
ROWS = sorted(
    (
        (
            bytes.fromhex(v["key"]),
            None if v["value"] is None else bytes.fromhex(v["value"]),
            v["partition"],
            v["offset"],
            v["timestamp"],
        )
        for v in VECTORS["vectors"]
    ),
    key=lambda r: (r[2], r[3]),
)


def _batch(rows: list[tuple[bytes, bytes | None, int, int, int]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "key": pa.array([r[0] for r in rows], pa.binary()),
            "value": pa.array([r[1] for r in rows], pa.binary()),
            "partition": pa.array([r[2] for r in rows], pa.int32()),
            "offset": pa.array([r[3] for r in rows], pa.int64()),
            "timestamp": pa.array([r[4] for r in rows], pa.int64()),
        }
    )


def _packed(rows: list[tuple[bytes, bytes | None, int, int, int]]) -> dict[str | None, bytes]:
    out: dict[str | None, bytes] = {}
    for b in pack_rows([_batch(rows)]):
        for gid, cell in zip(b.column("group_id").to_pylist(), b.column("packed").to_pylist(), strict=True):
            out[gid] = cell
    return out


def _fold(gid: str | None, cells: list[bytes], state: FakeGroupState) -> list[dict[str, Any]]:
    import pandas as pd

    frames = [pd.DataFrame({"packed": cells})]
    return [r for df in fold_share((gid,), iter(frames), state) for r in df.to_dict("records")]


def test_rows_are_packed_per_share_group_in_their_order() -> None:
    packed = _packed(ROWS)
    assert set(packed) == {"share-vec", "share-acks-vec", "share-del-vec"}
    cells = msgpack.unpackb(packed["share-acks-vec"], raw=False)
    assert len(cells) == 4 and [(p, o) for p, o, *_ in cells] == sorted((p, o) for p, o, *_ in cells)
    assert list(pack_rows([_batch([])])) == []  # an empty batch: nothing


def test_each_groups_fold_is_the_share_folds_own() -> None:
    for gid, cell in _packed(ROWS).items():
        state = FakeGroupState(0)
        rows = _fold(gid, [cell], state)
        records = [
            decode_share_state_record(k, v, Source(p, o, t))
            for p, o, t, k, v in msgpack.unpackb(cell, raw=False)
        ]
        expected = share.fold(None, sorted(records, key=lambda r: (r.source.partition, r.source.offset)), gid)
        counts = [json.loads(r["body"]) for r in rows if r["kind"] == "counts"]
        assert counts == [{"ok": len(records), "error": 0, "unknown": 0}]
        if expected is None:  # share-del-vec: the group's records end in its deletion
            assert [r["kind"] for r in rows] == ["counts", "deleted"] and not state.exists, gid
        else:
            (row,) = [r for r in rows if r["kind"] == "state"]
            assert row["blob"] == share.encode(expected) == state.get[1]
            assert json.loads(row["body"]) == json.loads(json.dumps(share.summary(expected), default=str))


def test_a_record_that_does_not_decode_is_an_error_row_and_the_rest_still_folds() -> None:
    key, value, p, o, t = next(r for r in ROWS if r[1] is not None and b"share-vec" in r[0])
    rows = _fold(
        "share-vec",
        [_packed([(key, value, p, o, t), (key, value[:9], p, o + 100, t)])["share-vec"]],
        FakeGroupState(0),
    )
    (error,) = [json.loads(r["body"]) for r in rows if r["kind"] == "error"]
    damaged = decode_share_state_record(key, value[:9])
    assert isinstance(damaged, DecodeError)
    assert (error["topic"], error["status"], error["source_offset"]) == (TOPIC, "error", o + 100)
    assert (error["error_kind"], error["error_reason"]) == (str(damaged.kind), damaged.reason)
    assert [json.loads(r["body"]) for r in rows if r["kind"] == "counts"] == [
        {"ok": 1, "error": 1, "unknown": 0}
    ]
    assert [r["kind"] for r in rows].count("state") == 1


def test_a_key_that_does_not_decode_goes_under_no_group_and_folds_nothing() -> None:
    packed = _packed([(b"\x00", b"\x00\x00", 0, 1, 2)])
    assert list(packed) == [None]
    rows = _fold(None, [packed[None]], FakeGroupState(0))
    assert [r["kind"] for r in rows] == ["error", "counts"]


@pytest.mark.spark
def test_the_sink_fills_the_store_and_reports_errors_once(spark: Any) -> None:
    store, errors_to = ShareStateStore(), SnapshotStore()
    state = FakeGroupState(0)
    rows = [
        (r["group_id"], r["kind"], r["body"], r["blob"])
        for gid, cell in _packed(ROWS).items()
        for r in _fold(gid, [cell], state if gid == "share-acks-vec" else FakeGroupState(0))
    ]
    rows.append(("x", "error", json.dumps({"topic": TOPIC, "status": "error", "source_offset": 9}), None))
    df = spark.createDataFrame(rows, OUTPUT_DDL)
    sink = ShareSink(store, errors_to)
    sink(df, 3)
    sink(df, 3)  # the batch run again after a restart: applied again, not counted twice
    assert set(dict(store.states())) == {"share-vec", "share-acks-vec"}  # share-del-vec: deleted
    assert store.records == {"ok": 9, "error": 0, "unknown": 0} and len(store.errors) == 1
    assert [e["source_offset"] for e in errors_to.errors_list()] == [9]


def _query(ready: bool, offsets: Any) -> ShareStateQuery:
    return ShareStateQuery(
        settings(checkpoint_location="/tmp/cp/"),
        lambda: None,
        ShareStateStore(),
        SnapshotStore(),
        offsets,
        ready=lambda: ready,  # type: ignore[arg-type,return-value]
    )


def test_when_the_supervisor_may_start_the_query() -> None:
    def ends(n: int) -> Any:
        return lambda topic: ({}, {p: 5 for p in range(n)})

    def fails(exc: Exception) -> Any:
        def read(topic: str) -> Any:
            raise exc

        return read

    assert _query(False, ends(3)).waiting() == "waiting for the mirror to catch up"
    assert _query(True, ends(0)).waiting() == f"waiting for {TOPIC}'s partitions"
    unknown = fails(RuntimeError("org.apache.kafka.common.errors.UnknownTopicOrPartitionException"))
    assert "no share group has initialised a share-partition yet" in (_query(True, unknown).waiting() or "")
    with pytest.raises(PermissionError, match=f"Describe and Read on {TOPIC}"):
        _query(True, fails(PermissionError("not authorized"))).waiting()
    with pytest.raises(OSError, match="broken"):
        _query(True, fails(OSError("broken"))).waiting()
    q = _query(True, ends(3))
    assert q.waiting() is None and q.describe() == f"{TOPIC}, 3 partitions"
    assert checkpoint_of(q.settings) == "/tmp/cp/share-group-state"


def test_the_wiring_names_share_partitions_and_serves_a_groups_share_state() -> None:
    store, lag = ShareStateStore(), LagTracker()
    gid, cell = "share-acks-vec", _packed(ROWS)["share-acks-vec"]
    state = FakeGroupState(0)
    (row,) = [r for r in _fold(gid, [cell], state) if r["kind"] == "state"]
    store.apply(1, [(gid, row["blob"], json.loads(row["body"]))])
    wanted = wanted_by(store, lag)
    assert wanted() == set()  # the topic id is not named yet
    topic_id = share.decode(row["blob"]).partitions.copy().popitem()[0][0]
    lag.topic_names[topic_id] = "orders"
    assert {t for t, _ in wanted()} == {"orders"}
    view = share_view_of(store, lag)
    assert view("nobody") is None
    assert view(gid)["partitions"][0]["topic"] == "orders"  # type: ignore[index]
    lag.apply_round(LogOffsets(1, {tp: PartitionEnds(0, 100, 100) for tp in wanted()}))
    assert view(gid)["lag"] is not None  # type: ignore[index]
