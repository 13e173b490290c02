"""The columnar interpreter: reads one *flat* struct of our schema tables for many rows at once.

Driven by the same `Struct` declarations as the scalar interpreter.  "Flat" means every regular
field is a fixed-width int, a uuid or a (nullable) string, classic or compact, and every tagged
field is fixed-width -- that covers every key and OffsetCommitValue V0-V4, i.e. ~99% of the
records in `__consumer_offsets`.  Rows are processed as numpy arrays of positions over the
Arrow data buffer: fixed-width reads are strided-window gathers, lengths and varints are
vectorized, strings are returned as (start, length, null) so the caller can build Arrow string
columns without a Python object per row.

Soundness contract (checked by a hypothesis test against the scalar interpreter): for a row the
columnar reader marks ``ok``, the scalar interpreter succeeds with exactly the same values.  The
columnar reader may *decline* rows it could read (varints of more than 3 bytes, unknown tags,
anything malformed, non-ASCII strings until the caller validates them); declined rows go through
the scalar interpreter, which produces the value or the precise `DecodeError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view

from decoders.schema import STRING, UUID, ArrayOf, Field, Primitive, Struct

I64 = npt.NDArray[np.int64]
Bool = npt.NDArray[np.bool_]
U8 = npt.NDArray[np.uint8]

PAD: Final = 16  # bytes of zero padding after the data so any 16-byte window stays in bounds


class PaddedBuffer:
    """The data buffer of a binary column, zero-padded, with cached fixed-size window views."""

    def __init__(self, data: U8) -> None:
        padded = np.zeros(len(data) + PAD, dtype=np.uint8)
        padded[: len(data)] = data
        self.data: U8 = padded
        self.size = len(data)
        self._windows: dict[int, npt.NDArray[np.uint8]] = {}

    def window(self, width: int) -> npt.NDArray[np.uint8]:
        w = self._windows.get(width)
        if w is None:
            w = sliding_window_view(self.data, width)
            self._windows[width] = w
        return w

    def ints(self, pos: I64, width: int, signed: bool) -> I64:
        """Big-endian ints of ``width`` bytes at ``pos`` (positions must be < size + PAD - width)."""
        if width == 1:
            b = self.data[pos]
            return (b.view(np.int8) if signed else b).astype(np.int64)
        raw = self.window(width)[pos]
        dt = np.dtype(f">{'i' if signed else 'u'}{width}")
        return raw.view(dt).reshape(-1).astype(np.int64)

    def fixed(self, pos: I64, width: int) -> U8:
        """(n, width) raw bytes at ``pos``."""
        return np.ascontiguousarray(self.window(width)[pos])


@dataclass
class StrColumn:
    """Strings of a flat-struct field: byte ``start``/``length`` in the buffer; ``null`` mask."""

    start: I64
    length: I64
    null: Bool


@dataclass
class FlatResult:
    ok: Bool
    ints: dict[str, I64] = field(default_factory=dict)
    strings: dict[str, StrColumn] = field(default_factory=dict)
    uuids: dict[str, U8] = field(default_factory=dict)


def _is_flat_type(t: object, tagged: bool) -> bool:
    if isinstance(t, ArrayOf | Struct):
        return False
    assert isinstance(t, Primitive)
    if tagged:
        return t.width is not None  # fixed-width tagged fields only (e.g. topicId, MetadataHash)
    return t.width is not None or t is STRING


def is_flat(struct: Struct, version: int, flexible: bool) -> bool:
    return all(_is_flat_type(f.type, False) for f in struct.regular_fields(version, flexible)) and all(
        _is_flat_type(f.type, True) for f in struct.tagged_fields(version, flexible)
    )


def _uvarint(buf: PaddedBuffer, cur: I64, end: I64, ok: Bool) -> tuple[I64, I64, Bool]:
    """Vectorized unsigned varint of at most 3 bytes (values < 2**21); longer ones are declined."""
    ok = ok & (cur < end)
    p = np.where(ok, cur, 0)
    b0 = buf.data[p].astype(np.int64)
    val = b0 & 0x7F
    more = ok & (b0 >= 0x80)
    if not more.any():
        return val, cur + 1, ok
    ok = ok & (~more | (cur + 1 < end))
    m1 = more & ok
    b1 = buf.data[np.where(m1, cur + 1, 0)].astype(np.int64)
    val = np.where(m1, val | ((b1 & 0x7F) << 7), val)
    more2 = m1 & (b1 >= 0x80)
    ok = ok & (~more2 | (cur + 2 < end))
    m2 = more2 & ok
    b2 = buf.data[np.where(m2, cur + 2, 0)].astype(np.int64)
    ok = ok & ~(m2 & (b2 >= 0x80))
    val = np.where(m2, val | (b2 << 14), val)
    return val, cur + 1 + m1 + m2, ok


@dataclass(frozen=True)
class _Run:
    """Consecutive fixed-width fields read with one gather: a big-endian numpy record dtype."""

    fields: tuple[Field, ...]
    width: int
    dtype: np.dtype[np.void]


_PLAN_CACHE: dict[tuple[int, int, bool], tuple[Field | _Run, ...]] = {}


def _plan(struct: Struct, version: int, flexible: bool) -> tuple[Field | _Run, ...]:
    key = (id(struct), version, flexible)
    plan = _PLAN_CACHE.get(key)
    if plan is not None:
        return plan
    steps: list[Field | _Run] = []
    run: list[Field] = []

    def close() -> None:
        if run:
            names, formats = [], []
            for f in run:
                t = f.type
                assert isinstance(t, Primitive) and t.width is not None
                names.append(f.name)
                formats.append("V16" if t is UUID else f">{'i' if t.signed else 'u'}{t.width}")
            dt = np.dtype({"names": names, "formats": formats})
            steps.append(_Run(tuple(run), dt.itemsize, dt))
            run.clear()

    for f in struct.regular_fields(version, flexible):
        if f.type is STRING:
            close()
            steps.append(f)
        else:
            run.append(f)
    close()
    plan = tuple(steps)
    _PLAN_CACHE[key] = plan
    return plan


def _read_run(
    buf: PaddedBuffer, run: _Run, cur: I64, end: I64, *, ok: Bool, out: FlatResult
) -> tuple[I64, Bool]:
    w = run.width
    ok = ok & (cur + w <= end)
    raw = np.ascontiguousarray(buf.window(w)[np.where(ok, cur, 0)])
    rec = raw.view(run.dtype).reshape(-1)
    offset = 0
    for f in run.fields:
        if f.type is UUID:
            out.uuids[f.name] = np.ascontiguousarray(raw[:, offset : offset + 16])
            offset += 16
        else:
            out.ints[f.name] = rec[f.name].astype(np.int64)
            t = f.type
            assert isinstance(t, Primitive) and t.width is not None
            offset += t.width
    return cur + w, ok


def _read_string(
    buf: PaddedBuffer,
    f: Field,
    cur: I64,
    end: I64,
    *,
    version: int,
    flexible: bool,
    ok: Bool,
    out: FlatResult,
) -> tuple[I64, Bool]:
    if flexible:
        n1, cur, ok = _uvarint(buf, cur, end, ok)
        null = n1 == 0
        n = n1 - 1
    else:
        ok = ok & (cur + 2 <= end)
        n = buf.ints(np.where(ok, cur, 0), 2, True)
        cur = cur + 2
        null = n == -1
        ok = ok & (n >= -1)
    if not f.is_nullable_in(version):
        ok = ok & ~null
    n = np.where(null | ~ok, 0, n)
    ok = ok & (cur + n <= end)
    out.strings[f.name] = StrColumn(start=cur, length=n, null=null & ok)
    return cur + n, ok


def decode_flat(
    buf: PaddedBuffer, pos: I64, end: I64, *, struct: Struct, version: int, flexible: bool
) -> FlatResult:
    """Read ``struct`` at ``version`` for every row starting at ``pos``; rows must end at ``end``.

    Values of rows that are not ``ok`` are garbage and must not be used.
    """
    if not is_flat(struct, version, flexible):
        raise ValueError(f"{struct.name} v{version} is not flat")
    ok: Bool = pos <= end
    out = FlatResult(ok=ok)
    cur = pos.copy()
    for step in _plan(struct, version, flexible):
        if isinstance(step, Field):
            cur, ok = _read_string(buf, step, cur, end, version=version, flexible=flexible, ok=ok, out=out)
        else:
            cur, ok = _read_run(buf, step, cur, end, ok=ok, out=out)
    if flexible:
        cur, ok = _read_tags(buf, struct.tagged_fields(version, flexible), cur, end, ok=ok, out=out)
    out.ok = ok & (cur == end)
    return out


def _read_tags(
    buf: PaddedBuffer, tagged: tuple[Field, ...], cur: I64, end: I64, *, ok: Bool, out: FlatResult
) -> tuple[I64, Bool]:
    count, cur, ok = _uvarint(buf, cur, end, ok)
    n = len(cur)
    for f in tagged:  # defaults for rows where the tag is absent
        t = f.type
        assert isinstance(t, Primitive)
        if t is UUID:
            out.uuids[f.name] = np.zeros((n, 16), dtype=np.uint8)
        else:
            out.ints[f.name] = np.full(n, f.wire_default(), dtype=np.int64)
    remaining = np.where(ok, count, 0)
    last_tag = np.full(n, -1, dtype=np.int64)
    for _ in range(len(tagged)):
        active = ok & (remaining > 0)
        if not active.any():
            break
        tag, c1, a1 = _uvarint(buf, cur, end, active)
        size, c2, a2 = _uvarint(buf, c1, end, a1)
        matched = np.zeros(n, dtype=np.bool_)
        for f in tagged:
            t = f.type
            assert isinstance(t, Primitive) and t.width is not None
            w = t.width
            m = a2 & (tag == f.tag) & (size == w) & (tag > last_tag) & (c2 + w <= end)
            if not m.any():
                continue
            p = np.where(m, c2, 0)
            if t is UUID:
                vals = buf.fixed(p, 16)
                out.uuids[f.name] = np.where(m[:, None], vals, out.uuids[f.name])
            else:
                out.ints[f.name] = np.where(m, buf.ints(p, w, t.signed), out.ints[f.name])
            matched |= m
        # A row with an unknown tag, a wrong size or an order problem is declined (scalar path).
        ok = ok & (~active | matched)
        cur = np.where(matched, c2 + size, cur)
        last_tag = np.where(matched, tag, last_tag)
        remaining = remaining - matched
    ok = ok & (remaining == 0)
    return cur, ok
