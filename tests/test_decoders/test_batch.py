"""The batch decoder: input shapes Spark may hand us, the output schema, payloads, chunking."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from decoders import batch as batch_mod
from decoders.batch import (
    OUTPUT_SCHEMA,
    OUTPUT_SPARK_DDL,
    decode_arrow,
    result_columns,
)
from decoders.decode import decode_record
from decoders.payload import payload_to_record
from decoders.records import DecodeError, ErrorKind, Record, Source
from lab.record_samples import Case, all_cases

CASES = [c for c in all_cases() if c.variant in ("full", "empty")]
T0 = 1_700_000_000_000
NO_SRC = Source(-1, -1, -1)


def rows_of(cases: list[Case], tombstones: bool = True) -> list[tuple[bytes, bytes | None]]:
    rows: list[tuple[bytes, bytes | None]] = [(c.key, c.value) for c in cases]
    if tombstones:
        rows += [(c.key, None) for c in cases[::5]]
    return rows


def to_batch(rows: list[tuple[bytes, bytes | None]], **overrides: Any) -> pa.RecordBatch:
    n = len(rows)
    cols: dict[str, Any] = {
        "key": pa.array([k for k, _ in rows], pa.binary()),
        "value": pa.array([v for _, v in rows], pa.binary()),
        "partition": pa.array([i % 50 for i in range(n)], pa.int32()),
        "offset": pa.array(range(1000, 1000 + n), pa.int64()),
        "timestamp": pa.array([T0 + i for i in range(n)], pa.int64()),
    }
    cols.update(overrides)
    return pa.record_batch(cols)


ROWS = rows_of(CASES)


def test_output_schema_and_spark_ddl() -> None:
    out = decode_arrow(to_batch(ROWS))
    assert out.schema == OUTPUT_SCHEMA
    assert out.num_rows == len(ROWS)
    assert OUTPUT_SPARK_DDL.startswith("status STRING, record_type SMALLINT, value_version SMALLINT")
    assert OUTPUT_SPARK_DDL.count(",") == len(OUTPUT_SCHEMA) - 1


def test_every_row_equals_the_scalar_decode() -> None:
    batch = to_batch(ROWS)
    out = decode_arrow(batch).to_pylist()
    for i, (k, v) in enumerate(ROWS):
        src = Source(i % 50, 1000 + i, T0 + i)
        expect = {f.name: None for f in OUTPUT_SCHEMA}
        expect.update(result_columns(decode_record(k, v, src)))
        expect.update(
            source_partition=src.partition, source_offset=src.offset, source_timestamp_ms=src.timestamp_ms
        )
        assert out[i] == expect, i


def test_payload_turns_back_into_the_typed_record() -> None:
    out = decode_arrow(to_batch(ROWS)).to_pylist()
    seen_types = set()
    for i, (k, v) in enumerate(ROWS):
        row = out[i]
        if row["record_type"] in (0, 1):
            assert row["payload"] is None or payload_to_record(row["payload"], NO_SRC).value.unknown_tags
            continue
        assert row["status"] == "ok"
        src = Source(i % 50, 1000 + i, T0 + i)
        rec = payload_to_record(row["payload"], src)
        assert rec == decode_record(k, v, src)
        seen_types.add(rec.record_type)
    assert seen_types == {k for k in range(2, 24) if k != 18}


def test_offset_commit_columns() -> None:
    (case,) = [c for c in CASES if c.rt.k == 1 and c.version == 4 and c.variant == "full"]
    row = decode_arrow(to_batch([(case.key, case.value)])).to_pylist()[0]
    rec = decode_record(case.key, case.value)
    assert isinstance(rec, Record)
    assert row["group_id"] == rec.key.group_id and row["partition_num"] == rec.key.partition
    assert row["committed_offset"] == rec.value.offset
    assert row["topic_id"] == rec.value.topic_id and len(row["topic_id"]) == 22
    assert row["payload"] is not None  # the "full" sample carries an unknown tag: kept in payload
    assert payload_to_record(row["payload"], NO_SRC).value.unknown_tags == ((90, b"\x01\x02\x03"),)


@pytest.mark.parametrize(
    "ts",
    [
        pa.array([T0, T0 + 1], pa.int64()),
        pa.array([T0, T0 + 1], pa.timestamp("ms")),
        pa.array([T0 * 1000, (T0 + 1) * 1000], pa.timestamp("us", tz="UTC")),
        pa.array([T0 * 1_000_000, (T0 + 1) * 1_000_000], pa.timestamp("ns")),
        pa.array([T0 // 1000, T0 // 1000 + 1], pa.timestamp("s")),
    ],
    ids=["int64", "ms", "us-utc", "ns", "s"],
)
def test_timestamp_column_types(ts: pa.Array) -> None:
    out = decode_arrow(to_batch(ROWS[:2], timestamp=ts))
    expected = [T0, T0 + 1] if ts.type != pa.timestamp("s") else [T0 // 1000 * 1000, T0 // 1000 * 1000 + 1000]
    assert out.column("source_timestamp_ms").to_pylist() == expected


def test_large_binary_sliced_and_chunked_inputs() -> None:
    batch = to_batch(ROWS)
    expect = decode_arrow(batch)
    large = batch.cast(
        pa.schema(
            [
                pa.field("key", pa.large_binary()),
                pa.field("value", pa.large_binary()),
                *list(batch.schema)[2:],
            ]
        )
    )
    assert decode_arrow(large).equals(expect)
    assert decode_arrow(batch.slice(7, 20)).equals(expect.slice(7, 20))
    table = pa.Table.from_batches([batch.slice(0, 10), batch.slice(10)])
    assert decode_arrow(table).equals(expect)


def test_chunking_of_big_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    batch = to_batch(ROWS)
    expect = decode_arrow(batch)
    monkeypatch.setattr(batch_mod, "CHUNK_ROWS", 7)
    assert decode_arrow(batch).equals(expect)


def test_empty_and_all_tombstone_batches() -> None:
    assert decode_arrow(to_batch([])).num_rows == 0
    out = decode_arrow(to_batch([(k, None) for k, _ in ROWS[:10]]))
    assert out.column("is_tombstone").to_pylist() == [True] * 10
    assert decode_arrow(to_batch([(k, None) for k, _ in ROWS[:10]]), fast_path=False).equals(out)


def test_extra_kafka_source_columns_are_ignored() -> None:
    topic = pa.array(["__consumer_offsets"] * len(ROWS))
    assert decode_arrow(to_batch(ROWS, topic=topic)).equals(decode_arrow(to_batch(ROWS)))


def test_error_rows_carry_the_kind_and_the_reason() -> None:
    ok_key = ROWS[0][0]
    bad = [
        (b"\x00", None),  # key shorter than its type prefix
        (ok_key, b"\x7f\x00"),  # value version 32512
        (ok_key + b"\x00", None),  # a byte after the last key field
    ]
    out = decode_arrow(to_batch(bad)).to_pylist()
    assert [r["status"] for r in out] == ["error"] * 3
    assert [r["error_kind"] for r in out] == ["truncated", "unknown_version", "trailing_bytes"]
    for (k, v), row in zip(bad, out, strict=True):
        err = decode_record(k, v)
        assert isinstance(err, DecodeError) and row["error_reason"] == err.reason
        assert ErrorKind(row["error_kind"]) is err.kind


def test_input_without_kafka_columns_is_rejected() -> None:
    with pytest.raises(ValueError, match="lacks column"):
        decode_arrow(pa.record_batch({"key": pa.array([b"\x00\x01"])}))


def test_a_fast_path_bug_falls_back_to_the_scalar_path(monkeypatch: pytest.MonkeyPatch) -> None:
    batch = to_batch(ROWS)
    expect = decode_arrow(batch, fast_path=False)

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("bug in the fast path")

    before = batch_mod.FAST_PATH_FALLBACKS[0]
    monkeypatch.setattr(batch_mod, "_fast_path", broken)
    assert decode_arrow(batch).equals(expect)
    assert batch_mod.FAST_PATH_FALLBACKS[0] == before + 1
