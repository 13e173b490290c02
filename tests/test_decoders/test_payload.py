"""The ``payload`` cell (`decoders.payload`): every typed record of the tables -- every type, version,
layout and sample variant, tombstones, unknown tags, a member's embedded decode error -- goes to one
plain MessagePack array and back to an equal record; a cell that is not a version-2 payload is a
ValueError naming the version, never a wrong record."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from decoders.decode import decode_record
from decoders.payload import PAYLOAD_VERSION, payload_to_record, record_to_payload
from decoders.records import DecodeError, Record, Source
from lab.record_samples import Case, all_cases
from tests.support.records import classic_value, commit_key, group_key

SRC = Source(partition=7, offset=2**40, timestamp_ms=1_700_000_000_123)
CASES = list(all_cases())


def _record(key: bytes, value: bytes | None) -> Record[Any, Any]:
    rec = decode_record(key, value, SRC)
    assert isinstance(rec, Record), rec
    return rec


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_every_record_of_the_tables_round_trips(case: Case) -> None:
    rec = _record(case.key, case.value)
    back = payload_to_record(record_to_payload(rec), SRC)
    assert back == rec
    assert type(back.key) is type(rec.key) and type(back.value) is type(rec.value)


def test_a_tombstone_round_trips_with_no_value() -> None:
    for key in (commit_key("g-ü/x", "t", 0), group_key("<b>grp</b>")):
        rec = _record(key, None)
        back = payload_to_record(record_to_payload(rec), SRC)
        assert back == rec and back.value is None and back.value_version is None


def test_a_members_embedded_decode_error_round_trips() -> None:
    """A GroupMetadataValue whose member's subscription bytes are broken keeps the group record and
    carries the error inside the member: the cell holds the error as data too."""
    value = bytearray(classic_value("m1", ["m1"]))
    # the member's subscription is the int32-length bytes after the two timeouts: make it 3 bytes
    # of garbage by rewriting the trailing "subscription length 0, assignment length 0"
    assert value[-8:] == b"\x00\x00\x00\x00\x00\x00\x00\x00"
    value[-8:] = b"\x00\x00\x00\x03\xff\xff\xff\x00\x00\x00\x00"
    rec = _record(group_key("g"), bytes(value))
    errors = [m.subscription_error for m in rec.value.members]
    assert isinstance(errors[0], DecodeError), errors
    assert payload_to_record(record_to_payload(rec), SRC) == rec


def test_the_cell_is_a_plain_messagepack_array_in_the_documented_order() -> None:
    """``[2, K, key, V, value, layout, ambiguous_layout]``, readable by any MessagePack reader
    without extension types; the source is not in it (the row's columns carry it)."""
    rec = _record(
        commit_key("g", "topic", 3),
        bytes.fromhex("0003" + "0000000000000064" + "00000005" + "0000" + "0000018bcfe56800"),
    )
    cells = msgpack.unpackb(record_to_payload(rec), raw=False)
    assert cells[0] == PAYLOAD_VERSION == 2
    assert cells[1] == 1
    assert cells[2] == ["g", "topic", 3]
    assert cells[3] == 3
    assert cells[4][:2] == [100, 5]
    assert cells[5:] == [None, False]
    assert str(SRC.offset) not in repr(cells)
    # the source is the reader's: the same cell under two sources
    other = Source(0, 1, 2)
    assert payload_to_record(record_to_payload(rec), other).source == other


@pytest.mark.parametrize(
    ("cell", "message"),
    [
        (b"", "not a version-2 payload"),
        (b"\xc1", "not a version-2 payload"),  # a byte MessagePack never uses
        (msgpack.packb([1, 1, ["g", "t", 0], 3, None, None, False]), r"version 1\)"),
        (msgpack.packb(["2", 1, ["g", "t", 0], 3, None, None, False]), r"version '2'\)"),
        (msgpack.packb([2, 1, ["g", "t", 0], 3, None, None]), "not a version-2 payload"),
        (msgpack.packb({"version": 2}), "not a version-2 payload"),
    ],
    ids=["empty", "invalid-byte", "version-1", "version-as-text", "six-cells", "a-map"],
)
def test_a_cell_that_is_not_a_version_2_payload_is_a_value_error(cell: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        payload_to_record(cell, SRC)
