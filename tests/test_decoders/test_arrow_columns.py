"""The batch decoder's Arrow builders and input readers (`decoders.arrow_columns`): string columns
built from buffer positions (inline views up to 12 bytes, longer ones pointing into their buffer,
several source buffers, Python strings patched in, nulls) equal Arrow's own from the same strings;
invalid UTF-8 rows are found; the binary, int and timestamp readers take every Arrow type and slice
Spark may hand over."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from decoders.arrow_columns import (
    BinaryColumn,
    IntColumn,
    StringColumn,
    as_binary,
    binary_parts,
    ints_of,
    timestamps_ms,
)
from decoders.columnar import PaddedBuffer

NON_ASCII = "grüppe-中文-🙂"
TEXTS = ["", "a", "x" * 12, "y" * 13, NON_ASCII, "<b>&amp;</b>", "m" * 300]


def _buffer(texts: list[str]) -> tuple[PaddedBuffer, np.ndarray, np.ndarray]:
    raw = [t.encode() for t in texts]
    starts = np.cumsum([0] + [len(b) for b in raw[:-1]]).astype(np.int64)
    data = np.frombuffer(b"".join(raw), dtype=np.uint8)
    return PaddedBuffer(data), starts, np.array([len(b) for b in raw], dtype=np.int64)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "mostly-empty"])
def test_string_column_from_positions_equals_arrows_own(sparse: bool) -> None:
    texts = TEXTS if not sparse else ["a" * 20] + [""] * 30
    buf, starts, lengths = _buffer(texts)
    col = StringColumn(len(texts))
    col.set_rows(np.arange(len(texts), dtype=np.int64), buf, starts, lengths)
    assert col.finish().equals(pa.array(texts, pa.string()))
    assert col.invalid_utf8_rows().size == 0


def test_string_column_mixes_buffers_python_strings_and_nulls() -> None:
    left, right = TEXTS[:4], TEXTS[4:]
    b1, s1, l1 = _buffer(left)
    b2, s2, l2 = _buffer(right)
    n = len(TEXTS) + 3
    col = StringColumn(n)
    col.set_rows(np.arange(0, 4, dtype=np.int64), b1, s1, l1)
    col.set_rows(np.arange(4, len(TEXTS), dtype=np.int64), b2, s2, l2)
    col.set(len(TEXTS), "slow-" + NON_ASCII)  # a row of the scalar path, > 12 bytes
    col.set(len(TEXTS) + 1, "short")  # inline
    col.set(len(TEXTS) + 2, None)
    col.set_rows(np.array([], dtype=np.int64), b1, s1[:0], l1[:0])  # nothing: no new buffer
    expected = [*TEXTS, "slow-" + NON_ASCII, "short", None]
    assert col.finish().to_pylist() == expected
    assert len(col.buffers) == 2


def test_a_row_set_then_unset_is_null() -> None:
    col = StringColumn(2)
    col.set(0, "gone")
    col.set(0, None)
    col.set(1, "kept")
    assert col.finish().to_pylist() == [None, "kept"]
    assert StringColumn(3).finish().to_pylist() == [None, None, None]


def test_invalid_utf8_rows_are_named() -> None:
    raw = [b"ok", b"\xc3\x28", b"fine-and-longer-than-12", b"\xff" * 20]
    starts = np.cumsum([0] + [len(b) for b in raw[:-1]]).astype(np.int64)
    buf = PaddedBuffer(np.frombuffer(b"".join(raw), dtype=np.uint8))
    col = StringColumn(4)
    col.set_rows(np.arange(4, dtype=np.int64), buf, starts, np.array([len(b) for b in raw], dtype=np.int64))
    assert col.invalid_utf8_rows().tolist() == [1, 3]


def test_int_column_keeps_nulls_and_its_type() -> None:
    col = IntColumn(4, pa.int16())
    col.set_rows(np.array([0, 2]), np.array([-32768, 32767]))
    col.set_rows(np.array([3]), np.array([5]), valid=np.array([False]))
    out = col.finish()
    assert out.type == pa.int16() and out.to_pylist() == [-32768, None, 32767, None]


def test_binary_column_of_a_few_rows() -> None:
    col = BinaryColumn(5)
    col.rows[3] = b"\x00\xff"
    col.rows[1] = b""
    assert col.finish().to_pylist() == [None, b"", None, b"\x00\xff", None]
    assert BinaryColumn(2).finish().to_pylist() == [None, None]


BYTES = [b"a", None, b"\x00\xff"]


@pytest.mark.parametrize(
    ("arr", "expected"),
    [
        (pa.array(BYTES, pa.binary()), BYTES),
        (pa.array(BYTES, pa.large_binary()), BYTES),
        (pa.array(BYTES, pa.binary_view()), BYTES),
        (pa.chunked_array([pa.array(BYTES[:2]), pa.array(BYTES[2:])]), BYTES),
        # a key read as a string column: its UTF-8 bytes
        (pa.array(["a", None, "\x00ÿ"], pa.string()), [b"a", None, b"\x00\xc3\xbf"]),
        (pa.array(["a", None], pa.large_string()), [b"a", None]),
    ],
    ids=["binary", "large_binary", "binary_view", "chunked", "string", "large_string"],
)
def test_as_binary_takes_what_a_source_hands_over(arr: pa.Array, expected: list[bytes | None]) -> None:
    out = as_binary(arr)
    assert pa.types.is_binary(out.type) or pa.types.is_large_binary(out.type)
    assert out.to_pylist() == expected


def test_as_binary_refuses_other_types() -> None:
    with pytest.raises(TypeError, match="expected a binary column, got int64"):
        as_binary(pa.array([1, 2]))
    assert as_binary(pa.nulls(2)).to_pylist() == [None, None]


@pytest.mark.parametrize("large", [False, True])
def test_binary_parts_of_a_slice_are_relative_to_the_slice(large: bool) -> None:
    values = [b"zero", None, b"", b"three", b"\x00\x01"]
    arr = pa.array(values, pa.large_binary() if large else pa.binary()).slice(1, 4)
    offsets, data, valid = binary_parts(arr)
    assert offsets[0] == 0 and valid.tolist() == [False, True, True, True]
    got = [bytes(data[offsets[i] : offsets[i + 1]]) if valid[i] else None for i in range(4)]
    assert got == values[1:]
    empty = binary_parts(pa.array([], pa.binary()))
    assert empty[0].tolist() == [0] and empty[1].size == 0 and empty[2].size == 0


T = 1_700_000_000_123


@pytest.mark.parametrize(
    ("arr", "expected"),
    [
        (pa.array([T, None], pa.int64()), [T, -1]),
        (pa.array([T, None], pa.timestamp("ms")), [T, -1]),
        (pa.array([T * 1000], pa.timestamp("us", tz="UTC")), [T]),
        (pa.array([T * 1_000_000 + 999_999], pa.timestamp("ns")), [T]),
        (pa.array([T // 1000], pa.timestamp("s")), [T // 1000 * 1000]),
        (pa.chunked_array([pa.array([T], pa.int64()), pa.array([T + 1], pa.int64())]), [T, T + 1]),
    ],
    ids=["int64", "ms-null", "us", "ns-floors", "s", "chunked"],
)
def test_timestamps_in_ms_from_any_unit(arr: pa.Array, expected: list[int]) -> None:
    assert timestamps_ms(arr).tolist() == expected


def test_ints_of_any_int_type_nulls_as_minus_one() -> None:
    assert ints_of(pa.array([1, None, 2**31 - 1], pa.int32())).tolist() == [1, -1, 2**31 - 1]
    assert ints_of(pa.chunked_array([pa.array([7], pa.int16())])).tolist() == [7]
