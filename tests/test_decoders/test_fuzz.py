"""Hypothesis: arbitrary and mutated bytes never raise past the decoder and never loop; the
columnar fast path agrees with the scalar interpreter on every input."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decoders.batch import decode_arrow
from decoders.columnar import PaddedBuffer, decode_flat
from decoders.decode import decode_record
from decoders.interpreter import UNKNOWN_TAGS, struct_reader
from decoders.kafka_json import record_json
from decoders.records import DecodeError, Record, UnknownRecord
from decoders.schema import STRING
from decoders.tables import RECORD_TYPES
from decoders.wire import WireError
from lab.encoder import encode_key, encode_value
from lab.record_samples import Case
from tests.support.strategies import record_strategy, struct_strategy

PER_RECORD = settings(max_examples=400, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
PER_BATCH = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """Flip, set, insert or delete a few bytes, or cut/extend the end."""
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["flip", "set", "insert", "delete", "cut", "extend"]))
        pos = draw(st.integers(0, max(len(buf) - 1, 0)))
        if op == "flip" and buf:
            buf[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and buf:
            buf[pos] = draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF, 0xFE]))
        elif op == "insert":
            buf.insert(pos, draw(st.integers(0, 255)))
        elif op == "delete" and buf:
            del buf[pos]
        elif op == "cut":
            del buf[pos:]
        elif op == "extend":
            buf += draw(st.binary(min_size=1, max_size=4))
    return bytes(buf)


def _check_result(key: bytes, value: bytes | None) -> None:
    res = decode_record(key, value)
    assert isinstance(res, Record | UnknownRecord | DecodeError)
    if isinstance(res, DecodeError):
        assert res.reason and res.part in ("key", "value") and res.position >= 0
    obj, status = record_json(key, value)
    assert status in ("ok", "unknown", "error")
    json.dumps(obj)


@PER_RECORD
@given(st.binary(max_size=64), st.one_of(st.none(), st.binary(max_size=128)))
def test_arbitrary_bytes_never_raise(key: bytes, value: bytes | None) -> None:
    _check_result(key, value)


@PER_RECORD
@given(st.sampled_from(sorted(RECORD_TYPES)), st.binary(max_size=200))
def test_arbitrary_values_of_every_known_type_never_raise(k: int, tail: bytes) -> None:
    rt = RECORD_TYPES[k]
    key = encode_key(rt, {f.name: "g" if f.type is STRING else 0 for f in rt.key.fields})
    _check_result(key, b"\x00\x00" + tail)  # version 0 exists for every type


@PER_RECORD
@given(st.data())
def test_mutated_records_never_raise(data: st.DataObject) -> None:
    case: Case = data.draw(record_strategy())
    key = data.draw(st.one_of(st.just(case.key), mutated(case.key)))
    value = data.draw(st.one_of(st.just(case.value), mutated(case.value)))
    _check_result(key, value)


# ----------------------------------------------------------------------------------------------
# fast path == scalar path


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
