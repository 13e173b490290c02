"""The batch decoder for Spark's ``mapInArrow``: Kafka rows in, decoded columns out.

No Spark import: input is a pyarrow ``RecordBatch``/``Table`` with the Kafka source's columns
``key`` (binary), ``value`` (binary, null = tombstone), ``partition`` (int32), ``offset`` (int64),
``timestamp`` (int64 ms, or an Arrow timestamp); output is `OUTPUT_SCHEMA`, one row per input
row, same order.

Two paths, one answer:

* the columnar fast path (`decoders.columnar`) reads offset-commit keys and values V0-V4 (~99%
  of the topic) straight off the Arrow buffers with numpy, driven by the same schema tables;
* every row it declines -- other record types, tombstones of other types, anything malformed,
  varints longer than 3 bytes, unknown tagged fields, invalid UTF-8 -- goes through the scalar
  interpreter (`decoders.decode.decode_record`), row by row.

``decode_arrow(batch, fast_path=False)`` runs everything through the scalar path; a hypothesis
test asserts both produce identical output for arbitrary and mutated input.

The columns are `decoders.columns.DECODED` (`OUTPUT_SCHEMA` binds their Arrow types).  Offset
commits are fully described by the flat columns (``payload`` is null unless the record has unknown
tagged fields); every other record type carries its full typed record in ``payload`` (MessagePack,
see `decoders.payload`; ``payload_to_record`` turns it back).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from decoders.columnar import FlatResult, PaddedBuffer, StrColumn, decode_flat, is_flat
from decoders.columns import DECODED, Column, spark_ddl
from decoders.decode import decode_record
from decoders.payload import record_to_payload
from decoders.records import (
    DecodeError,
    DecodeResult,
    ErrorKind,
    MemberKey,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    Source,
    UnknownRecord,
)
from decoders.schema import STRING, UUID, Struct
from decoders.tables import OFFSET_COMMIT_TYPES, RECORD_TYPES

I64 = npt.NDArray[np.int64]
Bool = npt.NDArray[np.bool_]
U8 = npt.NDArray[np.uint8]
_Binary = tuple[I64, U8, Bool]  # offsets, data, validity of a binary column

STATUS_OK: Final = "ok"
STATUS_UNKNOWN: Final = "unknown"
STATUS_ERROR: Final = "error"
_STATUS_CODES: Final = {STATUS_OK: 0, STATUS_UNKNOWN: 1, STATUS_ERROR: 2}
_STATUS_ARRAY: Final = pa.array([STATUS_OK, STATUS_UNKNOWN, STATUS_ERROR], pa.string())

#: column type name (`decoders.columns`) -> Arrow type
ARROW_TYPES: Final[dict[str, pa.DataType]] = {
    "string": pa.string(),
    "binary": pa.binary(),
    "bool": pa.bool_(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
}


def arrow_schema(columns: Sequence[Column]) -> pa.Schema:
    return pa.schema([pa.field(c.name, ARROW_TYPES[c.type], nullable=c.nullable) for c in columns])


OUTPUT_SCHEMA: Final = arrow_schema(DECODED)
OUTPUT_SPARK_DDL: Final = spark_ddl(DECODED)  # the schema string Spark's mapInArrow wants

# Typed-record attribute -> output column, for the flat offset-commit path (keys and values).
KEY_COLUMNS: Final = {"group_id": "group_id", "topic": "topic", "partition": "partition_num"}
VALUE_COLUMNS: Final = {
    "offset": "committed_offset",
    "leader_epoch": "leader_epoch",
    "metadata": "metadata",
    "commit_timestamp_ms": "commit_timestamp_ms",
    "expire_timestamp_ms": "expire_timestamp_ms",
    "topic_id": "topic_id",
}

CHUNK_ROWS: Final = 1 << 17
# Chunks re-decoded by the scalar path because the fast path raised (a bug if ever non-zero).
FAST_PATH_FALLBACKS: Final = [0]


# ============================================================================================
# Column builders


class _IntColumn:
    def __init__(self, n: int, pa_type: pa.DataType) -> None:
        self.values = np.zeros(n, dtype=np.int64)
        self.valid = np.zeros(n, dtype=np.bool_)
        self.type = pa_type

    def set_rows(self, rows: I64, values: I64, valid: Bool | None = None) -> None:
        self.values[rows] = values
        self.valid[rows] = True if valid is None else valid

    def finish(self) -> pa.Array:
        np_type = self.type.to_pandas_dtype()
        return pa.array(self.values.astype(np_type), type=self.type, mask=~self.valid)


# _KEEP[n] is a 12-byte mask keeping the first min(n, 12) bytes of an inline string view.
_KEEP: Final = np.array([[0xFF if j < n else 0 for j in range(12)] for n in range(13)], dtype=np.uint8)


class _StringColumn:
    """Builds an Arrow string column through Arrow's string_view layout, then one C++ cast.

    Fast rows are recorded as (buffer, start, length) -- 1-D scatters only -- and turned into the
    16-byte views in one full-length vectorized pass; slow rows (Python strings) are patched in
    afterwards.  No Python object is created per fast row.
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self.start = np.zeros(n, dtype=np.int64)
        self.length = np.zeros(n, dtype=np.int64)
        self.buf = np.full(n, -1, dtype=np.int32)
        self.valid = np.zeros(n, dtype=np.bool_)
        self.buffers: list[PaddedBuffer] = []
        self._buffer_ids: dict[int, int] = {}
        self._slow: dict[int, str] = {}
        self._views: npt.NDArray[np.int32] | None = None

    def set_rows(self, rows: I64, buf: PaddedBuffer, start: I64, length: I64) -> None:
        if rows.size == 0:
            return
        bi = self._buffer_ids.get(id(buf))
        if bi is None:
            bi = len(self.buffers)
            self.buffers.append(buf)
            self._buffer_ids[id(buf)] = bi
        self.start[rows] = start
        self.length[rows] = length
        self.buf[rows] = bi
        self.valid[rows] = True
        self._views = None

    def set(self, i: int, s: str | None) -> None:
        if s is None:
            self.valid[i] = False
            self._slow.pop(i, None)
        else:
            self._slow[i] = s
            self.valid[i] = True

    def _fast_views(self) -> npt.NDArray[np.int32]:
        if self._views is not None:
            return self._views
        n = self.n
        views = np.zeros((n, 4), dtype=np.int32)
        fast = self.valid & (self.buf >= 0)
        length = np.where(fast, self.length, 0)
        if not length.any():  # only empty strings / nulls (e.g. metadata ""): all-zero views
            self._views = views
            return views
        sparse = np.count_nonzero(length) < n // 4  # e.g. metadata: mostly "" -> only touch the rest
        for bi, buf in enumerate(self.buffers):
            if len(self.buffers) == 1 and not sparse:
                # One source buffer: full-length, slice-only assignments (rows that are not
                # fast have length 0, so their inline bytes are masked to zero).
                start = self.start
                inline = buf.window(12)[start] & _KEEP[np.minimum(length, 12)]
                views[:, 1:4] = inline.view(np.int32)
                long = length > 12
                views[:, 2] = np.where(long, bi, views[:, 2])
                views[:, 3] = np.where(long, start, views[:, 3])
            else:
                rows = np.flatnonzero(fast & (self.buf == bi) & (length > 0))
                start = self.start[rows]
                ln = length[rows]
                inline = buf.window(12)[start] & _KEEP[np.minimum(ln, 12)]
                part = np.ascontiguousarray(inline).view(np.int32)
                long = ln > 12
                part[:, 1] = np.where(long, bi, part[:, 1])
                part[:, 2] = np.where(long, start, part[:, 2])
                views[rows, 1:4] = part
        views[:, 0] = length
        self._views = views
        return views

    def _array(
        self, views: npt.NDArray[np.int32], extra: list[npt.NDArray[np.uint8]], string_type: pa.DataType
    ) -> pa.Array:
        validity = pa.py_buffer(np.packbits(self.valid, bitorder="little"))
        null_count = int(self.n - np.count_nonzero(self.valid))
        return pa.Array.from_buffers(
            string_type,
            self.n,
            [
                validity,
                pa.py_buffer(views),
                *(pa.py_buffer(b.data) for b in self.buffers),
                *(pa.py_buffer(e) for e in extra),
            ],
            null_count=null_count,
        )

    def invalid_utf8_rows(self) -> I64:
        """Fast rows whose bytes are not valid UTF-8 (normally none: one C++ validation pass)."""
        if not self.valid.any():
            return np.empty(0, dtype=np.int64)
        try:
            self._array(self._fast_views(), [], pa.string_view()).validate(full=True)
            return np.empty(0, dtype=np.int64)
        except pa.ArrowInvalid:
            pass
        bad = []
        for i in np.flatnonzero(self.valid & (self.buf >= 0)).tolist():
            buf = self.buffers[int(self.buf[i])]
            start = int(self.start[i])
            try:
                buf.data[start : start + int(self.length[i])].tobytes().decode("utf-8")
            except UnicodeDecodeError:
                bad.append(i)
        return np.asarray(bad, dtype=np.int64)

    def finish(self) -> pa.Array:
        if not self.valid.any():
            return pa.nulls(self.n, pa.string())
        views = self._fast_views()
        extra: list[npt.NDArray[np.uint8]] = []
        if self._slow:
            views = views.copy()
            vbytes = views.view(np.uint8).reshape(self.n, 16)
            blob = bytearray()
            blob_index = len(self.buffers)
            for i, s in self._slow.items():
                b = s.encode("utf-8")
                ln = len(b)
                views[i] = 0
                views[i, 0] = ln
                if ln <= 12:
                    vbytes[i, 4 : 4 + ln] = np.frombuffer(b, dtype=np.uint8)
                else:
                    vbytes[i, 4:8] = np.frombuffer(b[:4], dtype=np.uint8)
                    views[i, 2] = blob_index
                    views[i, 3] = len(blob)
                    blob += b
            extra.append(np.frombuffer(bytes(blob), dtype=np.uint8))
        return self._array(views, extra, pa.string_view()).cast(pa.string())


class _BinaryColumn:
    """A mostly-null binary column (``payload``): the few set rows are kept as bytes, and the
    Arrow buffers are built in one pass at the end."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.rows: dict[int, bytes] = {}

    def finish(self) -> pa.Array:
        if not self.rows:
            return pa.nulls(self.n, pa.binary())
        items = sorted(self.rows.items())
        at = np.fromiter((i for i, _ in items), dtype=np.int64, count=len(items))
        lengths = np.zeros(self.n, dtype=np.int64)
        lengths[at] = [len(b) for _, b in items]
        offsets = np.zeros(self.n + 1, dtype=np.int32)
        np.cumsum(lengths, out=offsets[1:])
        valid = np.zeros(self.n, dtype=np.bool_)
        valid[at] = True
        return pa.Array.from_buffers(
            pa.binary(),
            self.n,
            [
                pa.py_buffer(np.packbits(valid, bitorder="little")),
                pa.py_buffer(offsets),
                pa.py_buffer(b"".join(b for _, b in items)),
            ],
            null_count=self.n - len(items),
        )


# ============================================================================================
# Input normalisation


def _as_binary(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    if (
        pa.types.is_null(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary_view(t)
    ):
        arr = arr.cast(pa.binary())
    if not (pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type)):
        raise TypeError(f"expected a binary column, got {arr.type}")
    return arr


def _binary_parts(arr: pa.Array) -> tuple[I64, U8, Bool]:
    """(offsets relative to the returned data, data bytes, validity) of a (large_)binary array."""
    n = len(arr)
    bufs = arr.buffers()
    off_type = np.int64 if pa.types.is_large_binary(arr.type) else np.int32
    if n == 0:
        return np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.uint8), np.empty(0, dtype=np.bool_)
    off = np.frombuffer(bufs[1], dtype=off_type)[arr.offset : arr.offset + n + 1].astype(np.int64)
    base, top = int(off[0]), int(off[-1])
    data = (
        np.frombuffer(bufs[2], dtype=np.uint8)[base:top]
        if bufs[2] is not None and top > base
        else np.empty(0, np.uint8)
    )
    valid = (
        np.ones(n, dtype=np.bool_)
        if arr.null_count == 0
        else np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=np.bool_)
    )
    return off - base, data, valid


_TS_TO_MS: Final = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1_000_000)}  # (multiply, divide)


def _timestamps_ms(arr: pa.Array | pa.ChunkedArray) -> I64:
    """int64 milliseconds from an int64 (already ms) or an Arrow timestamp column of any unit."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    mul, div = _TS_TO_MS[arr.type.unit] if pa.types.is_timestamp(arr.type) else (1, 1)
    raw = np.asarray(arr.cast(pa.int64()).fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
    return raw * mul // div if (mul, div) != (1, 1) else raw


def _ints(arr: pa.Array | pa.ChunkedArray) -> I64:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    return np.asarray(arr.cast(pa.int64()).fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)


# ============================================================================================
# Row -> columns (the scalar path; the fast path must agree with it)


def result_columns(result: DecodeResult) -> dict[str, Any]:
    """The output columns (minus source_*) for one decode result."""
    if isinstance(result, Record):
        key, value = result.key, result.value
        cols: dict[str, Any] = {
            "status": STATUS_OK,
            "record_type": result.record_type,
            "value_version": result.value_version,
            "group_id": key.group_id,
            "is_tombstone": value is None,
            "ambiguous_layout": result.ambiguous_layout,
        }
        if isinstance(key, OffsetCommitKey):
            cols["topic"] = key.topic
            cols["partition_num"] = key.partition
        elif isinstance(key, MemberKey):
            cols["member_id"] = key.member_id
        if isinstance(value, OffsetCommitValue):
            cols["committed_offset"] = value.offset
            cols["leader_epoch"] = value.leader_epoch
            cols["metadata"] = value.metadata
            cols["commit_timestamp_ms"] = value.commit_timestamp_ms
            cols["expire_timestamp_ms"] = value.expire_timestamp_ms
            cols["topic_id"] = value.topic_id
            if value.unknown_tags:
                cols["payload"] = record_to_payload(result)
        elif result.record_type not in OFFSET_COMMIT_TYPES:
            cols["payload"] = record_to_payload(result)
        return cols
    if isinstance(result, UnknownRecord):
        return {
            "status": STATUS_UNKNOWN,
            "record_type": result.record_type,
            "is_tombstone": result.value_bytes is None,
            "ambiguous_layout": False,
        }
    cols = {
        "status": STATUS_ERROR,
        "record_type": result.record_type,
        "value_version": result.version,
        "is_tombstone": result.value_bytes is None,
        "ambiguous_layout": False,
        "error_part": result.part,
        "error_field": result.field,
        "error_position": result.position,
        "error_kind": str(result.kind),
        "error_reason": result.reason,
    }
    key = result.key
    if key is not None:
        cols["group_id"] = key.group_id
        if isinstance(key, OffsetCommitKey):
            cols["topic"] = key.topic
            cols["partition_num"] = key.partition
        elif isinstance(key, MemberKey):
            cols["member_id"] = key.member_id
    return cols


_INT_COLUMNS: Final = [
    f.name for f in OUTPUT_SCHEMA if pa.types.is_integer(f.type) and not f.name.startswith("source_")
]
_STR_COLUMNS: Final = [f.name for f in OUTPUT_SCHEMA if pa.types.is_string(f.type) and f.name != "status"]
_BIN_COLUMNS: Final = [f.name for f in OUTPUT_SCHEMA if pa.types.is_binary(f.type)]
_BOOL_COLUMNS: Final = [f.name for f in OUTPUT_SCHEMA if pa.types.is_boolean(f.type)]

# ============================================================================================
# base64url of 16-byte UUIDs, vectorized (Kafka's Uuid.toString)

_B64_ALPHABET: Final = np.frombuffer(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", dtype=np.uint8
)


def _kafka_uuid_chars(raw: U8) -> U8:
    """(m, 16) uuid bytes -> (m, 22) ASCII of URL-safe base64 without padding."""
    m = raw.shape[0]
    padded = np.zeros((m, 18), dtype=np.uint32)
    padded[:, :16] = raw
    g = padded.reshape(m, 6, 3)
    v = (g[:, :, 0] << 16) | (g[:, :, 1] << 8) | g[:, :, 2]
    sextets = np.stack([(v >> 18) & 63, (v >> 12) & 63, (v >> 6) & 63, v & 63], axis=2).reshape(m, 24)
    chars: U8 = _B64_ALPHABET[sextets[:, :22]]
    return chars


# ============================================================================================
# The decoder


@dataclass(frozen=True, slots=True)
class _Segment:
    """Rows of one (record type, struct, version) read by the columnar interpreter."""

    rows: I64
    result: FlatResult
    struct: Struct
    version: int
    buf: PaddedBuffer
    columns: dict[str, str]


def _decode_chunk(
    key: pa.Array, value: pa.Array, *, partition: I64, offset: I64, ts: I64, fast_path: bool
) -> pa.RecordBatch:
    n = len(key)
    koff, kdata, kvalid = _binary_parts(key)
    voff, vdata, vvalid = _binary_parts(value)
    ints = {name: _IntColumn(n, OUTPUT_SCHEMA.field(name).type) for name in _INT_COLUMNS}
    strs = {name: _StringColumn(n) for name in _STR_COLUMNS}
    bools = {name: np.zeros(n, dtype=np.bool_) for name in _BOOL_COLUMNS}
    bins = {name: _BinaryColumn(n) for name in _BIN_COLUMNS}
    status = np.zeros(n, dtype=np.int8)
    bools["is_tombstone"][:] = ~vvalid

    ok = np.zeros(n, dtype=np.bool_)
    segments: list[_Segment] = []
    # Arrow string views address their data with int32 offsets: a chunk whose key or value bytes
    # exceed 2 GiB (only possible with large_binary input) goes through the scalar path.
    if fast_path and max(len(kdata), len(vdata)) >= 2**31 - 64:
        fast_path = False
    if fast_path and n:
        ok, segments = _fast_path((koff, kdata, kvalid), (voff, vdata, vvalid), ints)
        # Strings are validated as UTF-8 in one C++ pass per column; offenders go to the scalar path.
        for seg in segments:
            seg_ok = seg.result.ok & ok[seg.rows]
            for fname, sc in seg.result.strings.items():
                colname = seg.columns.get(_attr(seg.struct, fname))
                if colname is not None:
                    keep = seg_ok & ~sc.null
                    strs[colname].set_rows(seg.rows[keep], seg.buf, sc.start[keep], sc.length[keep])
        for scol in strs.values():
            bad = scol.invalid_utf8_rows()
            if bad.size:
                ok[bad] = False
        _fill_fast(segments, ok, ints, strs)

    slow = np.flatnonzero(~ok)
    if slow.size:
        outputs = _Outputs(ints, strs, bools, bins, status)
        _fill_slow(slow, (koff, kdata, kvalid), (voff, vdata, vvalid), (partition, offset, ts), outputs)

    arrays: dict[str, pa.Array] = {
        "status": _STATUS_ARRAY.take(pa.array(status, pa.int8())),
        "source_partition": pa.array(partition.astype(np.int32), pa.int32()),
        "source_offset": pa.array(offset, pa.int64()),
        "source_timestamp_ms": pa.array(ts, pa.int64()),
    }
    for name, ic in ints.items():
        arrays[name] = ic.finish()
    for name, strcol in strs.items():
        arrays[name] = strcol.finish()
    for name, bv in bools.items():
        arrays[name] = pa.array(bv, pa.bool_())
    for name, bc in bins.items():
        arrays[name] = bc.finish()
    return pa.RecordBatch.from_arrays([arrays[f.name] for f in OUTPUT_SCHEMA], schema=OUTPUT_SCHEMA)


@dataclass(frozen=True, slots=True)
class _Outputs:
    ints: dict[str, _IntColumn]
    strs: dict[str, _StringColumn]
    bools: dict[str, Bool]
    bins: dict[str, _BinaryColumn]
    status: npt.NDArray[np.int8]


def _fill_slow(
    slow: I64, keys: _Binary, values: _Binary, sources: tuple[I64, I64, I64], out: _Outputs
) -> None:
    """Decode the declined rows one by one with the scalar interpreter, then fill the columns."""
    ints, strs, bools, status = out.ints, out.strs, out.bools, out.status
    koff, kdata, kvalid = keys
    voff, vdata, vvalid = values
    partition, offset, ts = sources
    kbytes = kdata.tobytes()
    vbytes = vdata.tobytes()
    rows: list[dict[str, Any]] = []
    for i in slow.tolist():
        src = Source(int(partition[i]), int(offset[i]), int(ts[i]))
        v = vbytes[voff[i] : voff[i + 1]] if vvalid[i] else None
        if kvalid[i]:
            result = decode_record(kbytes[koff[i] : koff[i + 1]], v, src)
        else:
            result = DecodeError(
                src, None, None, "key", "type", 0, ErrorKind.MALFORMED, "malformed: null key", None, b"", v
            )
        rows.append(result_columns(result))
    status[slow] = [_STATUS_CODES[c["status"]] for c in rows]
    for name, arr in bools.items():
        arr[slow] = [bool(c[name]) for c in rows]
    for name, icol in ints.items():
        vals = [c.get(name) for c in rows]
        icol.valid[slow] = [x is not None for x in vals]
        icol.values[slow] = [0 if x is None else x for x in vals]
    for name, scol in strs.items():
        texts = [c.get(name) for c in rows]
        scol.valid[slow] = [x is not None for x in texts]
        for i, text in zip(slow.tolist(), texts, strict=True):
            if text is not None:
                scol.set(i, text)
    for name, bcol in out.bins.items():
        for i, c in zip(slow.tolist(), rows, strict=True):
            blob = c.get(name)
            if blob is not None:
                bcol.rows[i] = blob


_ATTR_CACHE: dict[tuple[int, str], str] = {}


def _attr(struct: Struct, field_name: str) -> str:
    key = (id(struct), field_name)
    a = _ATTR_CACHE.get(key)
    if a is None:
        a = struct.field(field_name).attr
        _ATTR_CACHE[key] = a
    return a


def _fast_path(keys: _Binary, values: _Binary, ints: dict[str, _IntColumn]) -> tuple[Bool, list[_Segment]]:
    """Read K=0/1 keys and their V0-V4 values column-wise; returns the rows fully read (before
    UTF-8 validation) and the per-(struct, version) results to scatter into the output."""
    koff, kdata, kvalid = keys
    voff, vdata, vvalid = values
    n = len(kvalid)
    kb = PaddedBuffer(kdata)
    vb = PaddedBuffer(vdata)
    kstart, kend = koff[:-1], koff[1:]
    vstart, vend = voff[:-1], voff[1:]
    has_k = kvalid & (kend - kstart >= 2)
    k_type = np.full(n, -1, dtype=np.int64)
    k_type[has_k] = kb.ints(kstart[has_k], 2, True)
    ok = np.zeros(n, dtype=np.bool_)
    segments: list[_Segment] = []
    for k in sorted(OFFSET_COMMIT_TYPES):
        rows = np.flatnonzero(has_k & (k_type == k))
        if rows.size == 0:
            continue
        rt = RECORD_TYPES[k]
        kres = decode_flat(kb, kstart[rows] + 2, kend[rows], struct=rt.key, version=0, flexible=False)
        row_ok = kres.ok.copy()
        segments.append(_Segment(rows, kres, rt.key, 0, kb, KEY_COLUMNS))
        vs, ve = vstart[rows], vend[rows]
        has_v = vvalid[rows] & (ve - vs >= 2)
        ver = np.full(rows.size, -1, dtype=np.int64)
        ver[has_v] = vb.ints(vs[has_v], 2, True)
        value_ok = ~vvalid[rows]  # tombstones need no value
        family = rt.value
        for v in range(family.versions.lo, family.max_version + 1):
            sel = np.flatnonzero(has_v & (ver == v))
            if sel.size == 0:
                continue
            layouts = family.layouts_for(v)
            flexible = family.is_flexible(v)
            if len(layouts) != 1 or not is_flat(layouts[0].struct, v, flexible):
                continue
            vres = decode_flat(
                vb, vs[sel] + 2, ve[sel], struct=layouts[0].struct, version=v, flexible=flexible
            )
            value_ok[sel] = vres.ok
            segments.append(_Segment(rows[sel], vres, layouts[0].struct, v, vb, VALUE_COLUMNS))
            ints["value_version"].set_rows(rows[sel], np.full(sel.size, v, dtype=np.int64))
        ok[rows] = row_ok & value_ok
        ints["record_type"].set_rows(rows, np.full(rows.size, k, dtype=np.int64))
    return ok, segments


def _fill_fast(
    segments: list[_Segment], ok: Bool, ints: dict[str, _IntColumn], strs: dict[str, _StringColumn]
) -> None:
    """Scatter the columnar results of rows that stayed ``ok`` into the output columns."""
    for seg in segments:
        keep = seg.result.ok & ok[seg.rows]
        rows = seg.rows[keep]
        if rows.size == 0:
            continue
        for f in seg.struct.fields:
            col = seg.columns.get(f.attr)
            if col is None or seg.version not in f.versions:
                continue
            if f.type is UUID:
                raw = seg.result.uuids[f.name][keep]
                present = raw.any(axis=1)  # zero UUID -> None
                if present.any():
                    chars = _kafka_uuid_chars(raw[present])
                    cbuf = PaddedBuffer(chars.reshape(-1))
                    m = int(present.sum())
                    strs[col].set_rows(
                        rows[present], cbuf, np.arange(m, dtype=np.int64) * 22, np.full(m, 22, dtype=np.int64)
                    )
            elif f.type is STRING:
                sc: StrColumn = seg.result.strings[f.name]
                if "" in f.none_if:  # "" -> None (e.g. metadata)
                    empty = rows[(sc.length[keep] == 0) & ~sc.null[keep]]
                    strs[col].valid[empty] = False
            else:
                vals = seg.result.ints[f.name][keep]
                valid = ~np.isin(vals, np.asarray(f.none_if, dtype=np.int64)) if f.none_if else None
                ints[col].set_rows(rows, vals, valid)


def _decode_arrow_batch(batch: pa.RecordBatch | pa.Table, fast_path: bool) -> pa.RecordBatch:
    names = set(batch.schema.names)
    missing = {"key", "value", "partition", "offset", "timestamp"} - names
    if missing:
        raise ValueError(f"input lacks column(s) {sorted(missing)}")
    key = _as_binary(batch.column("key"))
    value = _as_binary(batch.column("value"))
    partition = _ints(batch.column("partition"))
    offset = _ints(batch.column("offset"))
    ts = _timestamps_ms(batch.column("timestamp"))
    n = len(key)
    out = []
    for lo in range(0, n, CHUNK_ROWS) if n else [0]:
        hi = min(n, lo + CHUNK_ROWS)
        args = (key[lo:hi], value[lo:hi])
        kwargs: dict[str, Any] = {"partition": partition[lo:hi], "offset": offset[lo:hi], "ts": ts[lo:hi]}
        try:
            out.append(_decode_chunk(*args, **kwargs, fast_path=fast_path))
        except Exception:
            if not fast_path:
                raise
            # Safety net: a fast-path bug must not stop the stream; the scalar path decodes every
            # row on its own and never raises for bad bytes.  Counted for the metrics exporter.
            FAST_PATH_FALLBACKS[0] += 1
            out.append(_decode_chunk(*args, **kwargs, fast_path=False))
    return out[0] if len(out) == 1 else pa.concat_batches(out)


def decode_arrow(data: pa.RecordBatch | pa.Table, *, fast_path: bool = True) -> pa.RecordBatch:
    """Decode a pyarrow RecordBatch/Table of Kafka rows into one RecordBatch of `OUTPUT_SCHEMA`.

    Never raises for bad *record* bytes (those become ``status == "error"`` rows); raises
    ValueError/TypeError only when the input is not shaped like Kafka rows at all.
    """
    return _decode_arrow_batch(data, fast_path)
