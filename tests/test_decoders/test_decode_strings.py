"""Non-ASCII strings and the compact-string varint boundary (127/128 bytes), scalar and batch."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest

from decoders.batch import decode_arrow
from decoders.decode import decode_record
from decoders.kafka_json import record_json
from decoders.records import DecodeError, Record
from lab.encoder import uvarint

GROUP = "grüppe-中文-🙂"


def s16(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def key(group: str = GROUP, topic: str = "tópico") -> bytes:
    return b"\x00\x01" + s16(group) + s16(topic) + struct.pack(">i", 3)


def v4(metadata: str, tail: bytes = b"\x00") -> bytes:
    m = metadata.encode()
    return (
        b"\x00\x04"
        + struct.pack(">qi", 100, 5)
        + uvarint(len(m) + 1)
        + m
        + struct.pack(">q", 1700000000000)
        + tail
    )


def _batch(rows: list[tuple[bytes, bytes | None]]) -> pa.RecordBatch:
    return pa.record_batch(
        {
            "key": pa.array([k for k, _ in rows], pa.binary()),
            "value": pa.array([v for _, v in rows], pa.binary()),
            "partition": pa.array([0] * len(rows), pa.int32()),
            "offset": pa.array(range(len(rows)), pa.int64()),
            "timestamp": pa.array([0] * len(rows), pa.int64()),
        }
    )


@pytest.mark.parametrize("nbytes", [0, 1, 12, 13, 126, 127, 128, 200, 4096])
def test_v4_metadata_across_the_varint_boundary(nbytes: int) -> None:
    metadata = ("é" * (nbytes // 2)) + ("x" * (nbytes % 2))  # non-ASCII, exactly nbytes UTF-8 bytes
    assert len(metadata.encode()) == nbytes
    value = v4(metadata)
    length_varint = uvarint(nbytes + 1)
    assert len(length_varint) == (1 if nbytes + 1 < 128 else 2)
    rec = decode_record(key(), value)
    assert isinstance(rec, Record)
    assert rec.key.group_id == GROUP and rec.key.topic == "tópico"
    assert rec.value.metadata == (metadata or None)
    obj, _ = record_json(key(), value)
    assert obj["key"]["data"]["group"] == GROUP
    assert obj["value"]["data"]["metadata"] == metadata
    out = decode_arrow(_batch([(key(), value)])).to_pylist()[0]
    assert (out["group_id"], out["topic"], out["metadata"]) == (GROUP, "tópico", metadata or None)
    assert out["status"] == "ok"


def test_mixed_batch_of_non_ascii_and_long_strings_fast_equals_scalar() -> None:
    rows = [(key(GROUP + str(i), "t" * (i % 40)), v4("m" * (i * 7 % 300), tail=b"\x00")) for i in range(200)]
    rows += [(key("g"), None), (key("g" * 300), v4("ok"))]
    batch = _batch(rows)
    assert decode_arrow(batch).equals(decode_arrow(batch, fast_path=False))
    out = decode_arrow(batch).to_pydict()
    assert out["group_id"][5] == GROUP + "5" and out["metadata"][5] == "m" * 35
    assert out["group_id"][-1] == "g" * 300


def test_invalid_utf8_is_an_error_in_both_paths() -> None:
    bad_key = b"\x00\x01" + b"\x00\x03" + b"g\xff\xfe" + s16("t") + struct.pack(">i", 0)
    err = decode_record(bad_key, None)
    assert isinstance(err, DecodeError) and err.field == "group" and "UTF-8" in err.reason
    bad_meta = b"\x00\x04" + struct.pack(">qi", 1, 1) + b"\x03\xc3\x28" + struct.pack(">q", 0) + b"\x00"
    batch = _batch([(key(), v4("fine")), (bad_key, None), (key(), bad_meta), (key(), v4("fine too"))])
    fast = decode_arrow(batch)
    assert fast.equals(decode_arrow(batch, fast_path=False))
    assert fast.column("status").to_pylist() == ["ok", "error", "error", "ok"]
    assert fast.column("error_field").to_pylist() == [None, "group", "metadata", None]
