"""The scalar wire reader (`decoders.wire`), primitive by primitive, from tables of real bytes:
Kafka's encodings (classic and compact strings and bytes, unsigned varints, array counts) at their
boundaries -- every width of a varint, the 127/128 compact boundary, null and empty, the extremes
of each int -- and every failure a structured `WireError` (position, kind, reason) before anything
is allocated."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from decoders.records import ErrorKind
from decoders.wire import (
    FIXED_ARRAY_FORMATS,
    PRIMITIVE_READERS,
    WireError,
    array_count_reader,
    bytes_reader,
    fixed_array_reader,
    read_uvarint,
    string_reader,
)

TRUNCATED, MALFORMED = ErrorKind.TRUNCATED, ErrorKind.MALFORMED


def uvarint(n: int) -> bytes:
    """Kafka's unsigned varint, written here independently of the encoder under test."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def read(reader: Any, data: bytes, pos: int = 0, end: int | None = None) -> tuple[Any, int]:
    return reader(data, pos, len(data) if end is None else end)


def fails(reader: Any, data: bytes, kind: ErrorKind, reason: str, pos: int = 0) -> None:
    with pytest.raises(WireError) as info:
        read(reader, data, pos)
    assert info.value.kind is kind and info.value.position == pos, (info.value.kind, info.value.position)
    assert reason in info.value.reason, info.value.reason


# ------------------------------------------------------------------------------------ fixed ints
@pytest.mark.parametrize(
    ("name", "data", "value"),
    [
        ("int8", b"\x80", -128),
        ("int8", b"\x7f", 127),
        ("int16", b"\xff\xff", -1),
        ("int16", b"\x80\x00", -(2**15)),
        ("uint16", b"\xff\xff", 2**16 - 1),
        ("int32", b"\x7f\xff\xff\xff", 2**31 - 1),
        ("int32", b"\x80\x00\x00\x00", -(2**31)),
        ("int64", b"\x80" + b"\x00" * 7, -(2**63)),
        ("int64", b"\x00" * 7 + b"\x2a", 42),
        ("uuid", bytes(range(16)), bytes(range(16))),
    ],
)
def test_fixed_width_primitives_read_big_endian(name: str, data: bytes, value: Any) -> None:
    reader = PRIMITIVE_READERS[name]
    assert read(reader, b"\xee" + data, pos=1) == (value, 1 + len(data))


@pytest.mark.parametrize("name", sorted(PRIMITIVE_READERS))
def test_fixed_width_primitives_cut_short_are_truncated(name: str) -> None:
    width = {"int8": 1, "int16": 2, "uint16": 2, "int32": 4, "int64": 8, "uuid": 16}[name]
    data = b"\x01" * (width + 3)
    # ``end`` bounds the read, not the buffer: a record's end inside a longer buffer
    with pytest.raises(WireError) as info:
        PRIMITIVE_READERS[name](data, 2, 2 + width - 1)
    e = info.value
    assert (e.kind, e.position) == (TRUNCATED, 2)
    assert e.reason == f"truncated: {name} needs {width} bytes, {width - 1} left"


# --------------------------------------------------------------------------------------- varints
@pytest.mark.parametrize(
    "value", [0, 1, 127, 128, 16383, 16384, 2**21 - 1, 2**21, 2**28 - 1, 2**28, 2**31 - 1]
)
def test_uvarint_reads_every_width_up_to_int32(value: int) -> None:
    data = uvarint(value)
    assert read(read_uvarint, data + b"\xff") == (value, len(data))


@pytest.mark.parametrize(
    ("data", "kind", "reason"),
    [
        (b"", TRUNCATED, "truncated: unsigned varint"),
        (b"\x80", TRUNCATED, "truncated: unsigned varint"),
        (b"\xff\xff\xff\xff", TRUNCATED, "truncated: unsigned varint"),
        (b"\x80\x80\x80\x80\x80\x00", MALFORMED, "longer than 5 bytes"),
        (uvarint(2**31), MALFORMED, "2147483648 exceeds int32"),
        (uvarint(2**32 - 1), MALFORMED, "exceeds int32"),
    ],
    ids=["empty", "continuation-then-end", "four-continuations", "six-bytes", "2^31", "2^32-1"],
)
def test_uvarint_failures(data: bytes, kind: ErrorKind, reason: str) -> None:
    fails(read_uvarint, data, kind, reason)


# --------------------------------------------------------------------------------------- strings
NON_ASCII = "grüppe-中文-🙂"


@pytest.mark.parametrize(
    ("text", "nullable"),
    [("", False), ("g", False), (NON_ASCII, True), ("x" * 126, False), ("x" * 127, False), ("é" * 200, True)],
    ids=["empty", "one", "non-ascii", "126", "127-compact-boundary", "400-bytes"],
)
def test_strings_classic_and_compact(text: str, nullable: bool) -> None:
    raw = text.encode()
    classic = len(raw).to_bytes(2, "big") + raw
    compact = uvarint(len(raw) + 1) + raw
    assert read(string_reader(nullable, compact=False), classic) == (text, len(classic))
    assert read(string_reader(nullable, compact=True), compact) == (text, len(compact))
    # a compact length of 128+1 needs a two-byte varint: the boundary real group ids cross
    assert len(compact) - len(raw) == (1 if len(raw) + 1 < 128 else 2)


def test_null_strings_and_bytes() -> None:
    assert read(string_reader(True, False), b"\xff\xff") == (None, 2)
    assert read(string_reader(True, True), b"\x00") == (None, 1)
    assert read(bytes_reader(True, False), b"\xff\xff\xff\xff") == (None, 4)
    assert read(bytes_reader(True, True), b"\x00") == (None, 1)
    fails(string_reader(False, False), b"\xff\xff", MALFORMED, "null in a non-nullable string")
    fails(string_reader(False, True), b"\x00", MALFORMED, "null in a non-nullable string")
    fails(bytes_reader(False, False), b"\xff\xff\xff\xff", MALFORMED, "null in non-nullable bytes")
    fails(bytes_reader(False, True), b"\x00", MALFORMED, "null in non-nullable bytes")


@pytest.mark.parametrize(
    ("compact", "data", "kind", "reason"),
    [
        (False, b"\x00", TRUNCATED, "string length needs 2 bytes, 1 left"),
        (False, b"\xff\xfe", MALFORMED, "negative string length -2"),
        (False, b"\x00\x05abc", TRUNCATED, "string of 5 bytes, 3 left"),
        (False, b"\x00\x02\xc3\x28", MALFORMED, "invalid UTF-8 at string byte 0"),
        (True, b"\x06abc", TRUNCATED, "string of 5 bytes, 3 left"),
        (True, b"\x03a\xff", MALFORMED, "invalid UTF-8 at string byte 1"),
        (True, b"\x80", TRUNCATED, "unsigned varint"),
    ],
)
def test_string_failures_name_what_is_wrong(compact: bool, data: bytes, kind: ErrorKind, reason: str) -> None:
    fails(string_reader(True, compact), b"..." + data, kind, reason, pos=3)


def test_a_string_may_not_run_past_its_records_end() -> None:
    """``end`` is the record's (or a tagged field's) end: bytes beyond it are someone else's."""
    data = b"\x00\x03abc" + b"more"
    with pytest.raises(WireError, match="string of 3 bytes, 2 left"):
        string_reader(False, False)(data, 0, 4)


@pytest.mark.parametrize(
    ("compact", "data", "value"),
    [
        (False, b"\x00\x00\x00\x00", b""),
        (False, b"\x00\x00\x00\x02\x00\xff", b"\x00\xff"),
        (True, b"\x01", b""),
        (True, b"\x03\x00\xff", b"\x00\xff"),
    ],
)
def test_bytes_classic_and_compact(compact: bool, data: bytes, value: bytes) -> None:
    assert read(bytes_reader(False, compact), data) == (value, len(data))


@pytest.mark.parametrize(
    ("compact", "data", "kind", "reason"),
    [
        (False, b"\x00\x00\x00", TRUNCATED, "bytes length needs 4 bytes, 3 left"),
        (False, b"\xff\xff\xff\xfe", MALFORMED, "negative bytes length -2"),
        (False, b"\x7f\xff\xff\xff", TRUNCATED, "bytes of length 2147483647, 0 left"),
        (True, b"\x05ab", TRUNCATED, "bytes of length 4, 2 left"),
    ],
)
def test_bytes_failures(compact: bool, data: bytes, kind: ErrorKind, reason: str) -> None:
    fails(bytes_reader(True, compact), data, kind, reason)


# ---------------------------------------------------------------------------------------- arrays
@pytest.mark.parametrize(
    ("compact", "data", "count"),
    [
        (False, b"\x00\x00\x00\x00", 0),
        (False, b"\x00\x00\x00\x02" + b"\x00" * 8, 2),
        (False, b"\xff\xff\xff\xff", -1),
        (True, b"\x01", 0),
        (True, b"\x03" + b"\x00" * 8, 2),
        (True, b"\x00", -1),
    ],
)
def test_array_counts(compact: bool, data: bytes, count: int) -> None:
    n, pos = read(array_count_reader(True, compact, min_element_size=4), data)
    assert n == count and pos == (4 if not compact else 1)


@pytest.mark.parametrize(
    ("compact", "data", "kind", "reason"),
    [
        (
            False,
            b"\x7f\xff\xff\xff" + b"\x00" * 16,
            MALFORMED,
            "array of 2147483647 elements cannot fit in the 16 bytes left",
        ),
        (
            False,
            b"\x00\x00\x00\x05" + b"\x00" * 19,
            MALFORMED,
            "array of 5 elements cannot fit in the 19 bytes left",
        ),
        (False, b"\xff\xff\xff\xfe", MALFORMED, "negative array length -2"),
        (False, b"\x00\x00", TRUNCATED, "array length needs 4 bytes, 2 left"),
        (True, uvarint(2**31 - 1), MALFORMED, "cannot fit"),
    ],
)
def test_array_counts_that_cannot_fit_fail_before_allocating(
    compact: bool, data: bytes, kind: ErrorKind, reason: str
) -> None:
    fails(array_count_reader(True, compact, min_element_size=4), data, kind, reason)


def test_a_null_array_where_none_is_allowed() -> None:
    fails(array_count_reader(False, False, 4), b"\xff\xff\xff\xff", MALFORMED, "null in a non-nullable array")
    fails(array_count_reader(False, True, 4), b"\x00", MALFORMED, "null in a non-nullable array")


@pytest.mark.parametrize("name", sorted(FIXED_ARRAY_FORMATS))
def test_fixed_arrays_read_n_ints_at_once(name: str) -> None:
    fmt, width = FIXED_ARRAY_FORMATS[name]
    values = {
        "int8": [-1, 0, 127],
        "int16": [-2, 300, 7],
        "uint16": [65535, 0, 1],
        "int32": [-(2**31), 5, 2**31 - 1],
        "int64": [-(2**63), 0, 2**63 - 1],
    }[name]
    data = b"\xaa" + struct.pack(f">{len(values)}{fmt}", *values)
    reader = fixed_array_reader(fmt, width)
    assert reader(data, 1, len(values)) == (values, 1 + len(values) * width)
    assert reader(data, 1, 0) == ([], 1)


def test_the_error_path_is_built_innermost_first() -> None:
    """The interpreter appends each enclosing field while the exception unwinds."""
    e = WireError(12, MALFORMED, "malformed: x")
    for seg in ("clientHost", "[1]", "members"):
        e.path.append(seg)
    assert e.field_path() == "members[1].clientHost"
    assert str(e) == "malformed: x"
