"""Builders of raw records from our schema tables: deterministic samples (hypothesis strategies over the
same tables: tests/support/strategies.py).

A raw record is what `decoders.decode.decode_raw` returns for a struct: a dict keyed by Kafka
field names, holding wire values, with every field of that version present (tagged fields at
their default when absent from the wire) and unknown tags under ``UNKNOWN_TAGS``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from decoders.interpreter import UNKNOWN_TAGS
from decoders.schema import (
    BYTES,
    STRING,
    UUID,
    ArrayOf,
    Field,
    FieldType,
    Layout,
    Primitive,
    RecordType,
    Struct,
)
from decoders.tables import RECORD_TYPES
from lab.encoder import encode_key, encode_value

NON_ASCII = "grüppe-中文-🙂"
LONG = "m" * 100 + "-métadonnées-" + "x" * 40  # > 127 UTF-8 bytes: a 2-byte compact length varint

INT_RANGES = {
    "int8": (-128, 127),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


# ============================================================================================
# Deterministic samples


class _Counter:
    def __init__(self) -> None:
        self._it = itertools.count(1)

    def __call__(self) -> int:
        return next(self._it)


def sample_value(
    t: FieldType,
    *,
    version: int,
    flexible: bool,
    nullable: bool,
    variant: str,
    n: _Counter,
    f: Field | None = None,
) -> Any:
    """variant: "empty" (nulls, empty arrays, defaults), "full" (everything present, non-ASCII and
    long strings, 2-element arrays) or "sentinels" (fields with none_if hold their sentinel)."""
    if variant == "sentinels" and f is not None and f.none_if:
        return f.none_if[0]
    if isinstance(t, Primitive):
        if nullable and variant == "empty":
            return None
        if t is STRING:
            if variant == "empty":
                return ""
            k = n()
            return NON_ASCII + str(k) if k % 2 else LONG + str(k)
        if t is BYTES:
            return b"" if variant == "empty" else bytes([n() % 256, 0, 255])
        if t is UUID:
            if variant == "empty":
                return bytes(16)
            k = n()
            return bytes((k + i) % 255 + 1 for i in range(16))
        lo, hi = INT_RANGES[t.name]
        if variant == "empty":
            return 0
        k = n()
        return max(lo, min(hi, -k if k % 3 == 0 else k * 7))
    if isinstance(t, ArrayOf):
        if nullable and variant == "empty":
            return None
        count = 0 if variant == "empty" else 2
        return [
            sample_value(t.element, version=version, flexible=flexible, nullable=False, variant=variant, n=n)
            for _ in range(count)
        ]
    if nullable and variant == "empty":
        return None
    return sample_struct(t, version, flexible, variant, n)


def sample_struct(
    s: Struct, version: int, flexible: bool, variant: str, n: _Counter | None = None
) -> dict[str, Any]:
    n = n or _Counter()
    out: dict[str, Any] = {}
    for f in s.fields:
        if version not in f.versions:
            continue
        tagged = flexible and f.is_tagged_in(version)
        if tagged and variant == "empty":
            out[f.name] = f.wire_default()
            continue
        v = sample_value(
            f.type,
            version=version,
            flexible=flexible,
            nullable=f.is_nullable_in(version),
            variant=variant,
            n=n,
            f=f,
        )
        if tagged and v == f.wire_default():
            v = f.wire_default()
        out[f.name] = v
    if flexible and variant == "full":
        out[UNKNOWN_TAGS] = ((90, b"\x01\x02\x03"),)  # a tag from a future Kafka: kept, skipped by size
    return out


@dataclass(frozen=True)
class Case:
    """One encodable record: type, version, layout, raw key and value, and their bytes."""

    rt: RecordType
    version: int
    layout: Layout
    variant: str
    key_raw: dict[str, Any]
    value_raw: dict[str, Any]
    #: the record types of the topic the case belongs to (`__consumer_offsets` unless said)
    registry: Mapping[int, RecordType] = field(
        default_factory=lambda: RECORD_TYPES, compare=False, repr=False
    )

    @property
    def key(self) -> bytes:
        return encode_key(self.rt, self.key_raw)

    @property
    def value(self) -> bytes:
        return encode_value(self.rt, self.version, self.value_raw, self.layout.struct)

    @property
    def id(self) -> str:
        return f"K{self.rt.k}-V{self.version}-{self.layout.label}-{self.variant}"


VARIANTS = ("empty", "full", "sentinels")


def all_cases(registry: Mapping[int, RecordType] = RECORD_TYPES) -> Iterator[Case]:
    """Every (record type, value version, layout, variant) in the tables -- inclusive ranges."""
    for k in sorted(registry):
        rt = registry[k]
        fam = rt.value
        for v in range(fam.versions.lo, fam.max_version + 1):
            for layout in fam.layouts_for(v):
                for variant in VARIANTS:
                    yield Case(
                        rt=rt,
                        version=v,
                        layout=layout,
                        variant=variant,
                        key_raw=sample_struct(rt.key, 0, False, "full"),
                        value_raw=sample_struct(layout.struct, v, fam.is_flexible(v), variant),
                        registry=registry,
                    )
