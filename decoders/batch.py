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

from decoders.arrow_columns import (
    BinaryColumn,
    IntColumn,
    StringColumn,
    as_binary,
    binary_parts,
    ints_of,
    timestamps_ms,
)
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
    koff, kdata, kvalid = binary_parts(key)
    voff, vdata, vvalid = binary_parts(value)
    ints = {name: IntColumn(n, OUTPUT_SCHEMA.field(name).type) for name in _INT_COLUMNS}
    strs = {name: StringColumn(n) for name in _STR_COLUMNS}
    bools = {name: np.zeros(n, dtype=np.bool_) for name in _BOOL_COLUMNS}
    bins = {name: BinaryColumn(n) for name in _BIN_COLUMNS}
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
    ints: dict[str, IntColumn]
    strs: dict[str, StringColumn]
    bools: dict[str, Bool]
    bins: dict[str, BinaryColumn]
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


def _fast_path(keys: _Binary, values: _Binary, ints: dict[str, IntColumn]) -> tuple[Bool, list[_Segment]]:
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
    segments: list[_Segment], ok: Bool, ints: dict[str, IntColumn], strs: dict[str, StringColumn]
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
    key = as_binary(batch.column("key"))
    value = as_binary(batch.column("value"))
    partition = ints_of(batch.column("partition"))
    offset = ints_of(batch.column("offset"))
    ts = timestamps_ms(batch.column("timestamp"))
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
