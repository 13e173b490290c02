"""The columnar interpreter (`decoders.columnar`) against the scalar one: for every row the
columnar reader accepts, the scalar reader reads the same values; and the batch decoder's fast path
(columnar, `decoders.batch.decode_arrow`) gives the same batch as its scalar path, for valid,
mutated, random and hand-made tricky inputs (tag order, varint widths, wrong-size UUIDs, UTF-8)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decoders.batch import decode_arrow
from decoders.columnar import PaddedBuffer, decode_flat, is_flat
from decoders.interpreter import UNKNOWN_TAGS, struct_reader
from decoders.tables import RECORD_TYPES
from decoders.wire import WireError
from lab.encoder import encode_key, encode_value
from lab.record_samples import Case
from tests.support.strategies import mutated, record_strategy, struct_strategy

PER_BATCH = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def kafka_row(draw: st.DrawFn) -> tuple[bytes, bytes | None]:
    kind = draw(st.sampled_from(["offset", "offset", "offset", "other", "mutated", "random", "tombstone"]))
    if kind == "random":
        return draw(st.binary(max_size=40)), draw(st.one_of(st.none(), st.binary(max_size=60)))
    case: Case = draw(record_strategy(types=(0, 1) if kind != "other" else None))
    if kind == "tombstone":
        return case.key, None
    if kind == "mutated":
        return draw(mutated(case.key)) if draw(st.booleans()) else case.key, draw(mutated(case.value))
    return case.key, case.value


def _batch(rows: list[tuple[bytes, bytes | None]]) -> pa.RecordBatch:
    return pa.record_batch(
        {
            "key": pa.array([k for k, _ in rows], pa.binary()),
            "value": pa.array([v for _, v in rows], pa.binary()),
            "partition": pa.array(range(len(rows)), pa.int32()),
            "offset": pa.array(range(len(rows)), pa.int64()),
            "timestamp": pa.array(range(len(rows)), pa.int64()),
        }
    )


@PER_BATCH
@given(st.lists(kafka_row(), min_size=1, max_size=25))
def test_fast_path_equals_scalar_path(rows: list[tuple[bytes, bytes | None]]) -> None:
    batch = _batch(rows)
    fast = decode_arrow(batch)
    slow = decode_arrow(batch, fast_path=False)
    assert fast.equals(slow), (fast.to_pylist(), slow.to_pylist())


def _flat_vs_scalar(
    struct: Any, version: int, flexible: bool, blobs: list[bytes], must_accept: list[bool]
) -> None:
    """For rows the columnar reader accepts, the scalar reader must agree value for value --
    except that UTF-8 validity is the caller's check (the batch decoder validates every string
    column in one C++ pass and declines offenders), so such rows must fail that check."""
    offsets = np.zeros(len(blobs) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in blobs], out=offsets[1:])
    buf = PaddedBuffer(np.frombuffer(b"".join(blobs), dtype=np.uint8))
    res = decode_flat(buf, offsets[:-1], offsets[1:], struct=struct, version=version, flexible=flexible)
    reader = struct_reader(struct, version, flexible)
    for i, blob in enumerate(blobs):
        if must_accept[i]:
            assert res.ok[i], blob.hex()
        if not res.ok[i]:
            continue
        strings: dict[str, str | None] = {}
        try:
            for name, sc in res.strings.items():
                start, stop = int(sc.start[i]), int(sc.start[i] + sc.length[i])
                strings[name] = None if sc.null[i] else bytes(buf.data[start:stop]).decode("utf-8")
        except UnicodeDecodeError:
            with_utf8_error = True
        else:
            with_utf8_error = False
        try:
            raw, end = reader(blob, 0, len(blob))
        except WireError as e:
            assert with_utf8_error and "UTF-8" in e.reason, (
                f"fast path accepted what scalar rejects: {blob.hex()}"
            )
            continue
        assert not with_utf8_error and end == len(blob), blob.hex()
        for name, col in res.ints.items():
            assert int(col[i]) == raw[name], name
        for name, text in strings.items():
            assert text == raw[name], name
        for name, u in res.uuids.items():
            assert bytes(u[i]) == raw[name], name


@PER_BATCH
@given(st.data())
def test_columnar_reader_is_sound_for_every_key_struct(data: st.DataObject) -> None:
    k = data.draw(st.sampled_from(sorted(RECORD_TYPES)))
    rt = RECORD_TYPES[k]
    raws = data.draw(st.lists(struct_strategy(rt.key, 0, False), min_size=1, max_size=8))
    blobs, accept = [], []
    for raw in raws:
        blob = encode_key(rt, raw)[2:]
        if data.draw(st.booleans()):
            blobs.append(data.draw(mutated(blob)))
            accept.append(False)
        else:
            blobs.append(blob)
            accept.append(True)
    _flat_vs_scalar(rt.key, 0, False, blobs, accept)


@PER_BATCH
@given(st.data())
def test_columnar_reader_is_sound_for_offset_commit_values(data: st.DataObject) -> None:
    rt = RECORD_TYPES[1]
    version = data.draw(st.integers(0, 4))
    struct = rt.value.layouts[0].struct
    flexible = rt.value.is_flexible(version)
    raws = data.draw(st.lists(struct_strategy(struct, version, flexible), min_size=1, max_size=8))
    blobs, accept = [], []
    for raw in raws:
        blob = encode_value(rt, version, raw)[2:]
        if data.draw(st.booleans()):
            blobs.append(data.draw(mutated(blob)))
            accept.append(False)
        else:
            blobs.append(blob)
            accept.append(UNKNOWN_TAGS not in raw)  # unknown tags are left to the scalar path
    _flat_vs_scalar(struct, version, flexible, blobs, accept)


_K1 = bytes.fromhex("0001" + "000167" + "000174" + "00000000")
_V4 = "0004" + "0000000000000064" + "00000005" + "01" + "0000018bcfe56800"
_V3 = "0003" + "0000000000000064" + "00000005"
TRICKY_VALUES = [
    _V4 + "00",
    _V4 + "01" + "00" + "10" + "11" * 16,  # topicId
    _V4 + "01" + "00" + "08" + "11" * 8,  # topicId with the wrong size (short)
    _V4 + "01" + "00" + "11" + "11" * 17,  # topicId with the wrong size (long)
    _V4 + "02" + "00" + "10" + "11" * 16 + "00" + "10" + "22" * 16,  # tag 0 twice
    _V4 + "02" + "05" + "01" + "aa" + "00" + "10" + "11" * 16,  # out of order
    _V4 + "02" + "00" + "10" + "11" * 16 + "05" + "01" + "aa",  # known + unknown
    _V4 + "01" + "80" + "00" + "10" + "11" * 16,  # tag as a 2-byte varint (0)
    _V4 + "8000",  # count as a 2-byte varint (0)
    _V4 + "00" + "00",  # trailing byte
    "0004" + "0000000000000064" + "00000005" + "00" + "0000018bcfe56800" + "00",  # null metadata
    "0004" + "0000000000000064" + "00000005" + "81808000" + "0000018bcfe56800" + "00",  # 4-byte varint
    "0004" + "0000000000000064" + "00000005" + "8001" + "61" * 127 + "0000018bcfe56800" + "00",
    _V3 + "ffff" + "0000018bcfe56800",  # null classic metadata
    _V3 + "0000" + "0000018bcfe56800",
    _V3 + "0001" + "c3" + "0000018bcfe56800",  # invalid UTF-8
    "0002" + "0000000000000064" + "0000" + "0000018bcfe56800",
    "0001" + "0000000000000064" + "0000" + "0000018bcfe56800",  # V1 missing expireTimestamp
    "0005" + "00" * 30,  # unknown version
    "00",
]


def test_tricky_offset_commit_values_fast_equals_scalar() -> None:
    rows: list[tuple[bytes, bytes | None]] = [(_K1, bytes.fromhex(v)) for v in TRICKY_VALUES]
    rows += [
        (bytes.fromhex("0000" + "000167" + "000174" + "00000000"), bytes.fromhex(v)) for v in TRICKY_VALUES
    ]
    batch = _batch(rows)
    fast = decode_arrow(batch)
    assert fast.equals(decode_arrow(batch, fast_path=False)), fast.to_pylist()
    statuses = fast.column("status").to_pylist()
    assert statuses[:4] == ["ok", "ok", "error", "error"]


# ----------------------------------------------------------------------------------------------
# what the columnar reader takes, and its buffer


def test_flat_means_every_key_and_offset_commit_values_and_nothing_with_arrays() -> None:
    """The docstring's coverage claim: every key struct and OffsetCommitValue V0-V4 are flat (the
    fast path takes them), GroupMetadataValue (arrays of members) is not -- and `decode_flat`
    refuses a struct that is not."""
    for k, rt in RECORD_TYPES.items():
        assert is_flat(rt.key, 0, False), k
    commit = RECORD_TYPES[1].value
    for version in range(commit.max_version + 1):
        assert is_flat(commit.layouts[0].struct, version, commit.is_flexible(version)), version
    group = RECORD_TYPES[2].value
    struct = group.layouts[0].struct
    assert not is_flat(struct, 3, group.is_flexible(3))
    buf = PaddedBuffer(np.zeros(4, dtype=np.uint8))
    with pytest.raises(ValueError, match="not flat"):
        decode_flat(buf, np.array([0]), np.array([4]), struct=struct, version=3, flexible=False)


@pytest.mark.parametrize(
    ("data", "width", "signed", "expected"),
    [
        (b"\x7f\xff", 2, True, 32767),
        (b"\x80\x00", 2, True, -32768),
        (b"\x80\x00", 2, False, 32768),
        (b"\xff", 1, True, -1),
        (b"\xff", 1, False, 255),
        (b"\x00\x00\x01\x00", 4, True, 256),
        (b"\xff\xff\xff\xff\xff\xff\xff\xfe", 8, True, -2),
    ],
)
def test_padded_buffer_reads_big_endian_ints(data: bytes, width: int, signed: bool, expected: int) -> None:
    buf = PaddedBuffer(np.frombuffer(data, dtype=np.uint8))
    assert buf.size == len(data)
    assert buf.ints(np.array([0], dtype=np.int64), width, signed).tolist() == [expected]


def test_padded_buffer_reads_past_the_end_as_zeros() -> None:
    """A window starting at the last byte stays in bounds (PAD zero bytes follow the data): a row
    cut short reads zeros, which the caller's ``end`` check then declines."""
    buf = PaddedBuffer(np.frombuffer(b"\x01\x02\x03", dtype=np.uint8))
    assert buf.fixed(np.array([2], dtype=np.int64), 16).tolist() == [[3] + [0] * 15]
    assert buf.ints(np.array([1, 2], dtype=np.int64), 4, False).tolist() == [0x02030000, 0x03000000]
