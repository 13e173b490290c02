"""Hypothesis strategies of raw records from our schema tables (the deterministic samples they
share names and ranges with live in `lab.record_samples`, which the benches use too)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st

from decoders.interpreter import UNKNOWN_TAGS
from decoders.schema import BYTES, STRING, UUID, ArrayOf, FieldType, Primitive, RecordType, Struct
from decoders.tables import RECORD_TYPES
from lab.record_samples import INT_RANGES, LONG, NON_ASCII, Case


def _text() -> st.SearchStrategy[str]:
    return st.one_of(
        st.text(max_size=20), st.sampled_from(["", NON_ASCII, LONG]), st.text(min_size=60, max_size=90)
    )


def value_strategy(
    t: FieldType, *, version: int, flexible: bool, nullable: bool, depth: int
) -> st.SearchStrategy[Any]:
    base: st.SearchStrategy[Any]
    if isinstance(t, Primitive):
        if t is STRING:
            base = _text()
        elif t is BYTES:
            base = st.binary(max_size=40)
        elif t is UUID:
            base = st.one_of(st.just(bytes(16)), st.binary(min_size=16, max_size=16))
        else:
            lo, hi = INT_RANGES[t.name]
            base = st.one_of(
                st.integers(lo, hi), st.sampled_from([0, -1, 1, lo, hi]).filter(lambda x: lo <= x <= hi)
            )
    elif isinstance(t, ArrayOf):
        elem = value_strategy(t.element, version=version, flexible=flexible, nullable=False, depth=depth + 1)
        base = st.lists(elem, max_size=3 if depth < 2 else 1)
    else:
        base = struct_strategy(t, version, flexible, depth=depth + 1)
    return st.one_of(st.none(), base) if nullable else base


def struct_strategy(
    s: Struct, version: int, flexible: bool, depth: int = 0
) -> st.SearchStrategy[dict[str, Any]]:
    parts: dict[str, st.SearchStrategy[Any]] = {}
    known_tags = set()
    for f in s.fields:
        if version not in f.versions:
            continue
        strat = value_strategy(
            f.type, version=version, flexible=flexible, nullable=f.is_nullable_in(version), depth=depth
        )
        if flexible and f.is_tagged_in(version):
            known_tags.add(f.tag)
            strat = st.one_of(st.just(f.wire_default()), strat)
        parts[f.name] = strat
    fixed = st.fixed_dictionaries(parts)
    if not flexible:
        return fixed
    unknown = st.lists(
        st.tuples(st.integers(0, 200).filter(lambda x: x not in known_tags), st.binary(max_size=6)),
        max_size=2,
        unique_by=lambda t: t[0],
    ).map(lambda xs: tuple(sorted(xs)))

    def attach(pair: tuple[dict[str, Any], tuple[tuple[int, bytes], ...]]) -> dict[str, Any]:
        d, u = pair
        if u:
            d = {**d, UNKNOWN_TAGS: u}
        return d

    return st.tuples(fixed, unknown).map(attach)


@st.composite
def record_strategy(
    draw: st.DrawFn, types: tuple[int, ...] | None = None, registry: Mapping[int, RecordType] = RECORD_TYPES
) -> Case:
    k = draw(st.sampled_from(types or sorted(registry)))
    rt = registry[k]
    fam = rt.value
    v = draw(st.integers(fam.versions.lo, fam.max_version))
    layout = draw(st.sampled_from(fam.layouts_for(v)))
    key_raw = draw(struct_strategy(rt.key, 0, False))
    value_raw = draw(struct_strategy(layout.struct, v, fam.is_flexible(v)))
    return Case(rt, v, layout, "random", key_raw, value_raw, registry)


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """Flip, set, insert or delete a few bytes, or cut/extend the end."""
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["flip", "set", "insert", "delete", "cut", "extend"]))
        pos = draw(st.integers(0, max(len(buf) - 1, 0)))
        if op == "flip" and buf:
            buf[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and buf:
            buf[pos] = draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF, 0xFE]))
        elif op == "insert":
            buf.insert(pos, draw(st.integers(0, 255)))
        elif op == "delete" and buf:
            del buf[pos]
        elif op == "cut":
            del buf[pos:]
        elif op == "extend":
            buf += draw(st.binary(min_size=1, max_size=4))
    return bytes(buf)
