"""Arrow column builders and input readers of the batch decoder (`decoders.batch`).

The builders take the decoded values of a chunk as numpy scatters (fast rows) and Python values
(rows of the scalar path) and make each output column in one pass at the end; the readers turn
the Kafka source's columns, whatever Arrow type they arrive in, into the numpy views the decoder
reads.  No Spark import, no decoding here.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from decoders.columnar import PaddedBuffer

I64 = npt.NDArray[np.int64]
Bool = npt.NDArray[np.bool_]
U8 = npt.NDArray[np.uint8]

# ============================================================================================
# Column builders


class IntColumn:
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


class StringColumn:
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


class BinaryColumn:
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


def as_binary(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
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


def binary_parts(arr: pa.Array) -> tuple[I64, U8, Bool]:
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


def timestamps_ms(arr: pa.Array | pa.ChunkedArray) -> I64:
    """int64 milliseconds from an int64 (already ms) or an Arrow timestamp column of any unit."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    mul, div = _TS_TO_MS[arr.type.unit] if pa.types.is_timestamp(arr.type) else (1, 1)
    raw = np.asarray(arr.cast(pa.int64()).fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
    return raw * mul // div if (mul, div) != (1, 1) else raw


def ints_of(arr: pa.Array | pa.ChunkedArray) -> I64:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    return np.asarray(arr.cast(pa.int64()).fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
