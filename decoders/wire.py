"""The one scalar wire reader: Kafka's primitive encodings, classic and flexible (spec §1.5).

Every reader has the shape ``read(buf, pos, end) -> (value, new_pos)`` over an immutable
``bytes``; ``end`` bounds the read (a record's end, or a tagged field's end).  Failures raise
`WireError` carrying the byte position of the field being read; the interpreter adds the field
path while the exception unwinds and turns it into a `decoders.records.DecodeError` -- no
exception ever leaves the decoder's public functions.

Guards against pathological input: every length and count is checked against the bytes that
remain *before* anything is allocated, varints are limited to 5 bytes and to int32 range, and
strings must be valid UTF-8.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Final

from decoders.records import ErrorKind

Reader = Callable[[bytes, int, int], tuple[Any, int]]

_I8: Final = struct.Struct(">b")
_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_I64: Final = struct.Struct(">q")
_U16: Final = struct.Struct(">H")

INT32_MAX: Final = 0x7FFFFFFF
TAGS_FIELD: Final = "_taggedFields"  # pseudo field name for the tagged-field trailer in error paths


class WireError(Exception):
    """Raised inside the decoder only; ``path`` is filled innermost-first while unwinding."""

    __slots__ = ("kind", "path", "position", "reason")

    def __init__(self, position: int, kind: ErrorKind, reason: str) -> None:
        super().__init__(reason)
        self.position = position
        self.kind = kind
        self.reason = reason
        self.path: list[str] = []

    def field_path(self) -> str:
        out = ""
        for seg in reversed(self.path):
            if seg.startswith("["):
                out += seg
            else:
                out = f"{out}.{seg}" if out else seg
        return out


def _truncated(pos: int, end: int, what: str, need: int) -> WireError:
    return WireError(
        pos, ErrorKind.TRUNCATED, f"truncated: {what} needs {need} bytes, {max(end - pos, 0)} left"
    )


def read_int8(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    if pos + 1 > end:
        raise _truncated(pos, end, "int8", 1)
    return _I8.unpack_from(buf, pos)[0], pos + 1


def read_int16(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    if pos + 2 > end:
        raise _truncated(pos, end, "int16", 2)
    return _I16.unpack_from(buf, pos)[0], pos + 2


def read_uint16(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    if pos + 2 > end:
        raise _truncated(pos, end, "uint16", 2)
    return _U16.unpack_from(buf, pos)[0], pos + 2


def read_int32(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    if pos + 4 > end:
        raise _truncated(pos, end, "int32", 4)
    return _I32.unpack_from(buf, pos)[0], pos + 4


def read_int64(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    if pos + 8 > end:
        raise _truncated(pos, end, "int64", 8)
    return _I64.unpack_from(buf, pos)[0], pos + 8


def read_uuid(buf: bytes, pos: int, end: int) -> tuple[bytes, int]:
    if pos + 16 > end:
        raise _truncated(pos, end, "uuid", 16)
    return buf[pos : pos + 16], pos + 16


def read_uvarint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Unsigned (not zig-zag) varint, at most 5 bytes, value within int32 range (Kafka reads into
    a Java int; anything larger would be a negative length there)."""
    result = 0
    shift = 0
    p = pos
    while True:
        if p >= end:
            raise WireError(pos, ErrorKind.TRUNCATED, "truncated: unsigned varint")
        b = buf[p]
        p += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift >= 35:
            raise WireError(pos, ErrorKind.MALFORMED, "malformed: unsigned varint longer than 5 bytes")
    if result > INT32_MAX:
        raise WireError(pos, ErrorKind.MALFORMED, f"malformed: unsigned varint {result} exceeds int32")
    return result, p


def _utf8(buf: bytes, start: int, stop: int, pos: int) -> str:
    try:
        return buf[start:stop].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WireError(
            pos, ErrorKind.MALFORMED, f"malformed: invalid UTF-8 at string byte {exc.start}"
        ) from None


def string_reader(nullable: bool, compact: bool) -> Reader:
    """Classic: int16 length (-1 = null).  Compact: uvarint length+1 (0 = null)."""
    if compact:

        def read_compact_string(buf: bytes, pos: int, end: int) -> tuple[str | None, int]:
            n1, p = read_uvarint(buf, pos, end)
            if n1 == 0:
                if nullable:
                    return None, p
                raise WireError(pos, ErrorKind.MALFORMED, "malformed: null in a non-nullable string")
            stop = p + n1 - 1
            if stop > end:
                raise WireError(
                    pos, ErrorKind.TRUNCATED, f"truncated: string of {n1 - 1} bytes, {end - p} left"
                )
            return _utf8(buf, p, stop, pos), stop

        return read_compact_string

    def read_string(buf: bytes, pos: int, end: int) -> tuple[str | None, int]:
        if pos + 2 > end:
            raise _truncated(pos, end, "string length", 2)
        n = _I16.unpack_from(buf, pos)[0]
        p = pos + 2
        if n < 0:
            if n == -1 and nullable:
                return None, p
            if n == -1:
                raise WireError(pos, ErrorKind.MALFORMED, "malformed: null in a non-nullable string")
            raise WireError(pos, ErrorKind.MALFORMED, f"malformed: negative string length {n}")
        stop = p + n
        if stop > end:
            raise WireError(pos, ErrorKind.TRUNCATED, f"truncated: string of {n} bytes, {end - p} left")
        try:  # inlined (not _utf8): this is the hottest scalar read
            return buf[p:stop].decode("utf-8"), stop
        except UnicodeDecodeError as exc:
            raise WireError(
                pos, ErrorKind.MALFORMED, f"malformed: invalid UTF-8 at string byte {exc.start}"
            ) from None

    return read_string


def bytes_reader(nullable: bool, compact: bool) -> Reader:
    """Classic: int32 length (-1 = null).  Compact: uvarint length+1 (0 = null)."""
    if compact:

        def read_compact_bytes(buf: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
            n1, p = read_uvarint(buf, pos, end)
            if n1 == 0:
                if nullable:
                    return None, p
                raise WireError(pos, ErrorKind.MALFORMED, "malformed: null in non-nullable bytes")
            stop = p + n1 - 1
            if stop > end:
                raise WireError(
                    pos, ErrorKind.TRUNCATED, f"truncated: bytes of length {n1 - 1}, {end - p} left"
                )
            return buf[p:stop], stop

        return read_compact_bytes

    def read_bytes(buf: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
        if pos + 4 > end:
            raise _truncated(pos, end, "bytes length", 4)
        n = _I32.unpack_from(buf, pos)[0]
        p = pos + 4
        if n < 0:
            if n == -1 and nullable:
                return None, p
            if n == -1:
                raise WireError(pos, ErrorKind.MALFORMED, "malformed: null in non-nullable bytes")
            raise WireError(pos, ErrorKind.MALFORMED, f"malformed: negative bytes length {n}")
        if p + n > end:
            raise WireError(pos, ErrorKind.TRUNCATED, f"truncated: bytes of length {n}, {end - p} left")
        return buf[p : p + n], p + n

    return read_bytes


def array_count_reader(nullable: bool, compact: bool, min_element_size: int) -> Reader:
    """Reads an array's element count and fails fast -- before any allocation -- when the count
    cannot possibly fit in the remaining bytes (e.g. a count of 2**31 - 1 in a 20-byte record).
    Returns -1 for a null array."""
    min_size = max(min_element_size, 1)

    def read_count(buf: bytes, pos: int, end: int) -> tuple[int, int]:
        if compact:
            n1, p = read_uvarint(buf, pos, end)
            n = n1 - 1
        else:
            if pos + 4 > end:
                raise _truncated(pos, end, "array length", 4)
            n = _I32.unpack_from(buf, pos)[0]
            p = pos + 4
            if n < -1:
                raise WireError(pos, ErrorKind.MALFORMED, f"malformed: negative array length {n}")
        if n == -1:
            if nullable:
                return -1, p
            raise WireError(pos, ErrorKind.MALFORMED, "malformed: null in a non-nullable array")
        if n * min_size > end - p:
            raise WireError(
                pos,
                ErrorKind.MALFORMED,
                f"malformed: array of {n} elements cannot fit in the {end - p} bytes left",
            )
        return n, p

    return read_count


def fixed_array_reader(fmt_char: str, width: int) -> Callable[[bytes, int, int], tuple[list[int], int]]:
    """Reads ``n`` fixed-width big-endian ints in one ``struct.unpack_from`` call (``[]int32`` etc.)."""
    cache: dict[int, struct.Struct] = {}

    def read_n(buf: bytes, pos: int, n: int) -> tuple[list[int], int]:
        s = cache.get(n)
        if s is None:
            s = struct.Struct(f">{n}{fmt_char}")
            if len(cache) < 64:
                cache[n] = s
        return list(s.unpack_from(buf, pos)), pos + n * width

    return read_n


PRIMITIVE_READERS: Final[dict[str, Reader]] = {
    "int8": read_int8,
    "int16": read_int16,
    "uint16": read_uint16,
    "int32": read_int32,
    "int64": read_int64,
    "uuid": read_uuid,
}

FIXED_ARRAY_FORMATS: Final[dict[str, tuple[str, int]]] = {
    "int8": ("b", 1),
    "int16": ("h", 2),
    "uint16": ("H", 2),
    "int32": ("i", 4),
    "int64": ("q", 8),
}
