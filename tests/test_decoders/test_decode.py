"""Errors are data: unknown types and versions, malformed and pathological records, unknown tags."""

from __future__ import annotations

import time

import pytest

from decoders import decode as decode_mod
from decoders.decode import decode_record
from decoders.kafka_json import record_json
from decoders.records import DecodeError, ErrorKind, OffsetCommitKey, Record, Source, UnknownRecord

K1 = bytes.fromhex("0001" + "000167" + "000174" + "00000000")
K2 = bytes.fromhex("0002" + "000167")
V4_BASE = "0004" + "0000000000000064" + "00000005" + "01" + "0000018bcfe56800"
SRC = Source(1, 2, 3)


@pytest.mark.parametrize("k", [18, 24, 99, 32767, -1, -32768])
def test_unknown_record_types_are_not_errors(k: int) -> None:
    key = k.to_bytes(2, "big", signed=True) + b"\x00\x01g"
    rec = decode_record(key, b"\x00\x00", SRC)
    assert rec == UnknownRecord(SRC, k, key, b"\x00\x00")
    obj, status = record_json(key, None)
    assert status == "unknown" and obj == {"unknown": {"type": k, "key": key.hex(), "value": None}}


@pytest.mark.parametrize(("k", "version"), [(1, 5), (1, -1), (2, 5), (0, 7), (3, 1), (23, 1), (15, -2)])
def test_unknown_value_version_of_a_known_type(k: int, version: int) -> None:
    from decoders.tables import RECORD_TYPES
    from lab.encoder import encode_key
    from lab.record_samples import sample_struct

    rt = RECORD_TYPES[k]
    key = encode_key(rt, sample_struct(rt.key, 0, False, "full"))
    err = decode_record(key, version.to_bytes(2, "big", signed=True) + b"\x00" * 30, SRC)
    assert isinstance(err, DecodeError)
    assert (err.record_type, err.version, err.part, err.field, err.position) == (
        k,
        version,
        "value",
        "version",
        0,
    )
    assert "unknown value version" in err.reason and err.kind is ErrorKind.UNKNOWN_VERSION
    assert err.key is not None and err.source == SRC


def test_pathological_array_count_fails_fast_at_the_count() -> None:
    value = bytes.fromhex(
        "0003" + "0008" + b"consumer".hex() + "00000001" + "ffff" + "ffff" + "0000000000000001"
    )
    value += (2**31 - 1).to_bytes(4, "big") + b"\x00" * 16
    t0 = time.perf_counter()
    err = decode_record(K2, value)
    assert time.perf_counter() - t0 < 0.05
    assert isinstance(err, DecodeError)
    assert err.field == "members" and "cannot fit" in err.reason and err.position == 28  # 2+10+4+2+2+8
    assert err.kind is ErrorKind.MALFORMED


def test_pathological_compact_lengths() -> None:
    # Compact string length varint of 5 bytes announcing ~2**31 bytes.
    err = decode_record(K1, bytes.fromhex("0004" + "0000000000000064" + "00000005" + "ffffffff07"))
    assert isinstance(err, DecodeError) and err.field == "metadata" and "truncated" in err.reason
    # A varint longer than 5 bytes.
    err = decode_record(K1, bytes.fromhex("0004" + "0000000000000064" + "00000005" + "ffffffffff01"))
    assert isinstance(err, DecodeError) and err.field == "metadata" and "longer than 5 bytes" in err.reason
    # A varint beyond int32.
    err = decode_record(K1, bytes.fromhex("0004" + "0000000000000064" + "00000005" + "ffffffff0f"))
    assert isinstance(err, DecodeError) and "exceeds int32" in err.reason


M, T, TB = ErrorKind.MALFORMED, ErrorKind.TRUNCATED, ErrorKind.TRAILING_BYTES


@pytest.mark.parametrize(
    ("value_hex", "field", "kind", "words"),
    [
        ("0003" + "0000000000000064" + "ffffffff" + "ffff" + "0000018bcfe56800", "metadata", M, "null"),
        ("0003" + "0000000000000064" + "ffffffff" + "fffe" + "0000018bcfe56800", "metadata", M, "negative"),
        (
            "0003" + "0000000000000064" + "ffffffff" + "0000" + "0000018bcfe56800" + "00",
            "<end>",
            TB,
            "after the last",
        ),
        (V4_BASE + "00" + "00", "<end>", TB, "after the last"),
        (V4_BASE + "01" + "00" + "08" + "0102030405060708", "topicId", T, "uuid needs 16 bytes"),
        (V4_BASE + "01" + "00" + "11" + "01" * 17, "topicId", M, "declares 17 bytes, its value uses 16"),
        (V4_BASE + "02" + "05" + "00" + "03" + "00", "_taggedFields", M, "must ascend"),
        (V4_BASE + "05" + "00", "_taggedFields", M, "cannot fit"),
        (
            "0003" + "0000000000000064" + "ffffffff" + "0002" + "c328" + "0000018bcfe56800",
            "metadata",
            M,
            "UTF-8",
        ),
    ],
)
def test_malformed_values(value_hex: str, field: str, kind: ErrorKind, words: str) -> None:
    err = decode_record(K1, bytes.fromhex(value_hex), SRC)
    assert isinstance(err, DecodeError), err
    assert err.field == field and words in err.reason and err.kind is kind, err
    assert err.key == OffsetCommitKey("g", "t", 0)
    obj, status = record_json(K1, bytes.fromhex(value_hex))
    assert status == "error" and obj["error"]["field"] == field and obj["error"]["type"] == 1
    assert obj["error"]["kind"] == kind.value


def test_unknown_tags_are_skipped_by_size_and_kept() -> None:
    topic_id = bytes(range(1, 17))
    value = bytes.fromhex(V4_BASE + "02" + "00" + "10" + topic_id.hex() + "07" + "03" + "aabbcc")
    rec = decode_record(K1, value)
    assert isinstance(rec, Record)
    assert rec.value.topic_id == "AQIDBAUGBwgJCgsMDQ4PEA"
    assert rec.value.unknown_tags == ((7, b"\xaa\xbb\xcc"),)
    obj, _ = record_json(K1, value)
    assert "topicId" in obj["value"]["data"] and len(obj["value"]["data"]) == 5  # unknown tag not printed
    assert obj["value"]["extra"] == {"unknownTaggedFields": [{"path": "", "tag": 7, "data": "qrvM"}]}


def test_known_tag_equal_to_default_is_not_printed() -> None:
    value = bytes.fromhex(V4_BASE + "01" + "00" + "10" + "00" * 16)  # topicId present but zero
    rec = decode_record(K1, value)
    assert isinstance(rec, Record) and rec.value.topic_id is None
    obj, _ = record_json(K1, value)
    assert "topicId" not in obj["value"]["data"]


def test_null_key_and_empty_key() -> None:
    err = decode_record(b"", None)
    assert isinstance(err, DecodeError) and err.field == "type" and err.part == "key"
    err = decode_record(b"\x00", b"\x00\x00")
    assert isinstance(err, DecodeError) and err.field == "type" and err.record_type is None


def test_internal_errors_never_escape(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(raw: object) -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(decode_mod, "to_record", boom)
    err = decode_record(K1, None, SRC)
    assert isinstance(err, DecodeError) and "internal decoder error" in err.reason and err.source == SRC
    assert err.kind is ErrorKind.INTERNAL


def test_json_builder_bugs_never_escape(monkeypatch: pytest.MonkeyPatch) -> None:
    from decoders import kafka_json

    def boom(raw: object) -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(kafka_json, "raw_record_json", boom)
    obj, status = record_json(K1, None)
    assert status == "error" and "internal decoder error" in obj["error"]["reason"]
    assert obj["error"]["kind"] == "internal"
