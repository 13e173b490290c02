"""Test-only encoder: raw dicts (Kafka field names, wire values) -> bytes, driven by our schema tables.

The mirror image of `decoders.interpreter`, written independently of it so that round trips
test the reader rather than agree with it by construction.  It also records, for every byte it
writes, the path of the field that byte belongs to (`Spans`), which the truncation table uses
to know which field a decoder must name when a record is cut at any byte.
"""

from __future__ import annotations

import struct as pystruct
from dataclasses import dataclass, field
from typing import Any

from decoders.interpreter import UNKNOWN_TAGS
from decoders.schema import BYTES, STRING, UUID, ArrayOf, FieldType, Primitive, RecordType, Struct

TAGS = "_taggedFields"

_FMT = {"int8": ">b", "int16": ">h", "uint16": ">H", "int32": ">i", "int64": ">q"}


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


@dataclass
class Spans:
    """Byte-position -> field path, filled while encoding."""

    paths: list[str] = field(default_factory=list)

    def add(self, n: int, path: str) -> None:
        self.paths.extend([path] * n)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


class Writer:
    def __init__(self, spans: Spans | None = None) -> None:
        self.buf = bytearray()
        self.spans = spans

    def put(self, data: bytes, path: str) -> None:
        self.buf += data
        if self.spans is not None:
            self.spans.add(len(data), path)

    # -- primitives ---------------------------------------------------------------------------
    def value(
        self, t: FieldType, v: Any, *, version: int, flexible: bool, nullable: bool, path: str, tagged: bool
    ) -> None:
        if isinstance(t, Primitive):
            self.primitive(t, v, flexible=flexible, path=path)
        elif isinstance(t, ArrayOf):
            self.array(t, v, version=version, flexible=flexible, path=path)
        elif v is None:
            assert nullable, f"{path}: null for a non-nullable struct"
            self.put(uvarint(0) if tagged else b"\xff", path)
        else:
            if nullable:
                self.put(uvarint(1) if tagged else b"\x01", path)
            self.struct(t, v, version=version, flexible=flexible, path=path)

    def primitive(self, t: Primitive, v: Any, *, flexible: bool, path: str) -> None:
        if t.name in _FMT:
            self.put(pystruct.pack(_FMT[t.name], v), path)
        elif t is UUID:
            assert isinstance(v, bytes) and len(v) == 16
            self.put(v, path)
        elif t is STRING or t is BYTES:
            data = None if v is None else (v.encode("utf-8") if t is STRING else v)
            if flexible:
                self.put(uvarint(0 if data is None else len(data) + 1), path)
            elif t is STRING:
                self.put(pystruct.pack(">h", -1 if data is None else len(data)), path)
            else:
                self.put(pystruct.pack(">i", -1 if data is None else len(data)), path)
            if data:
                self.put(data, path)
        else:
            raise TypeError(t)

    def array(self, t: ArrayOf, v: list[Any] | None, *, version: int, flexible: bool, path: str) -> None:
        if flexible:
            self.put(uvarint(0 if v is None else len(v) + 1), path)
        else:
            self.put(pystruct.pack(">i", -1 if v is None else len(v)), path)
        for i, x in enumerate(v or ()):
            self.value(
                t.element,
                x,
                version=version,
                flexible=flexible,
                nullable=False,
                path=f"{path}[{i}]",
                tagged=False,
            )

    def struct(self, s: Struct, raw: dict[str, Any], *, version: int, flexible: bool, path: str) -> None:
        for f in s.regular_fields(version, flexible):
            self.value(
                f.type,
                raw[f.name],
                version=version,
                flexible=flexible,
                nullable=f.is_nullable_in(version),
                path=_join(path, f.name),
                tagged=False,
            )
        if flexible:
            self.trailer(s, raw, version=version, path=path)

    def trailer(self, s: Struct, raw: dict[str, Any], *, version: int, path: str) -> None:
        entries: list[tuple[int, bytes, str]] = []
        for f in s.tagged_fields(version, True):
            v = raw.get(f.name, f.wire_default())
            if v == f.wire_default():
                continue  # Kafka writes a tagged field only when it differs from its default
            sub = Writer()
            sub.value(
                f.type,
                v,
                version=version,
                flexible=True,
                nullable=f.is_nullable_in(version),
                path="",
                tagged=True,
            )
            assert f.tag is not None
            entries.append((f.tag, bytes(sub.buf), _join(path, f.name)))
        for tag, data in raw.get(UNKNOWN_TAGS, ()):
            entries.append((tag, data, _join(path, TAGS)))
        entries.sort()
        self.put(uvarint(len(entries)), _join(path, TAGS))
        for tag, data, fpath in entries:
            self.put(uvarint(tag) + uvarint(len(data)), _join(path, TAGS))
            self.put(data, fpath)


def encode_struct(s: Struct, raw: dict[str, Any], version: int, flexible: bool) -> bytes:
    w = Writer()
    w.struct(s, raw, version=version, flexible=flexible, path="")
    return bytes(w.buf)


def encode_key(rt: RecordType, raw: dict[str, Any]) -> bytes:
    return encode_key_spans(rt, raw)[0]


def encode_key_spans(rt: RecordType, raw: dict[str, Any]) -> tuple[bytes, list[str]]:
    spans = Spans()
    w = Writer(spans)
    w.put(pystruct.pack(">h", rt.k), "type")
    w.struct(rt.key, raw, version=0, flexible=False, path="")
    return bytes(w.buf), spans.paths


def encode_value(
    rt: RecordType, version: int, raw: dict[str, Any], layout_struct: Struct | None = None
) -> bytes:
    return encode_value_spans(rt, version, raw, layout_struct)[0]


def encode_value_spans(
    rt: RecordType, version: int, raw: dict[str, Any], layout_struct: Struct | None = None
) -> tuple[bytes, list[str]]:
    struct = layout_struct or rt.value.layouts_for(version)[0].struct
    spans = Spans()
    w = Writer(spans)
    w.put(pystruct.pack(">h", version), "version")
    w.struct(struct, raw, version=version, flexible=rt.value.is_flexible(version), path="")
    return bytes(w.buf), spans.paths


def encode_embedded(s: Struct, version: int, raw: dict[str, Any], read_as: int | None = None) -> bytes:
    """A consumer-protocol blob: int16 version + classic struct (written with ``read_as`` fields)."""
    w = Writer()
    w.put(pystruct.pack(">h", version), "version")
    w.struct(s, raw, version=version if read_as is None else read_as, flexible=False, path="")
    return bytes(w.buf)
