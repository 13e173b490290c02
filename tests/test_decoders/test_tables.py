"""The schema tables are coherent with the typed classes and with the spec's record-type list."""

from __future__ import annotations

import dataclasses
import types
import typing

import pytest

from decoders import records as rec_mod
from decoders.schema import ALL, NONE, UUID, ArrayOf, Field, Struct
from decoders.tables import CONSUMER_ASSIGNMENT, CONSUMER_SUBSCRIPTION, RECORD_TYPES


def _structs() -> list[Struct]:
    seen: dict[int, Struct] = {}

    def walk(s: Struct) -> None:
        if id(s) in seen:
            return
        seen[id(s)] = s
        for f in s.fields:
            t = f.type
            while isinstance(t, ArrayOf):
                t = t.element
            if isinstance(t, Struct):
                walk(t)

    for rt in RECORD_TYPES.values():
        walk(rt.key)
        for lay in rt.value.layouts:
            walk(lay.struct)
    walk(CONSUMER_SUBSCRIPTION)
    walk(CONSUMER_ASSIGNMENT)
    return list(seen.values())


STRUCTS = _structs()


def test_record_types_are_the_spec_list() -> None:
    # Spec §1.3: K=0..23 except 18 (trunk-only, in no release).
    assert sorted(RECORD_TYPES) == [k for k in range(24) if k != 18]


@pytest.mark.parametrize("struct", STRUCTS, ids=lambda s: s.name)
def test_every_field_has_an_attribute_on_the_typed_class(struct: Struct) -> None:
    assert struct.cls is not None
    names = {f.name for f in dataclasses.fields(struct.cls)}
    for f in struct.fields:
        assert f.attr in names, f"{struct.name}.{f.name} -> {struct.cls.__name__}.{f.attr} missing"


def _optional(tp: object) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in typing.get_args(tp)


def _can_be_none(f: Field) -> bool:
    """Absent in some version, nullable, tagged, sentinel-mapped, or a UUID (zero -> None)."""
    return f.versions != ALL or f.nullable != NONE or f.tag is not None or bool(f.none_if) or f.type is UUID


@pytest.mark.parametrize("struct", STRUCTS, ids=lambda s: s.name)
def test_fields_that_can_be_none_are_optional(struct: Struct) -> None:
    assert struct.cls is not None
    hints = typing.get_type_hints(struct.cls, vars(rec_mod))
    for f in struct.fields:
        if _can_be_none(f):
            assert _optional(hints[f.attr]), f"{struct.cls.__name__}.{f.attr} should be Optional"


def _reachable(s: Struct) -> list[Struct]:
    out = [s]
    for f in s.fields:
        t = f.type
        while isinstance(t, ArrayOf):
            t = t.element
        if isinstance(t, Struct):
            out.extend(_reachable(t))
    return out


VALUE_STRUCTS = {
    id(x) for rt in RECORD_TYPES.values() for lay in rt.value.layouts for x in _reachable(lay.struct)
}


@pytest.mark.parametrize("struct", STRUCTS, ids=lambda s: s.name)
def test_classes_of_flexible_structs_keep_unknown_tags(struct: Struct) -> None:
    """Every value family has a flexible version, so every struct reachable from a value can carry
    unknown tagged fields, and its class must have somewhere to keep them."""
    assert struct.cls is not None
    has = "unknown_tags" in {f.name for f in dataclasses.fields(struct.cls)}
    assert has == (id(struct) in VALUE_STRUCTS), struct.name


def test_every_value_family_has_a_flexible_version() -> None:
    for rt in RECORD_TYPES.values():
        fam = rt.value
        assert any(fam.is_flexible(v) for v in range(fam.versions.lo, fam.max_version + 1))


def test_timestamps_are_named_ms() -> None:
    for s in STRUCTS:
        for f in s.fields:
            if "timestamp" in f.name.lower() or "timeout" in f.name.lower():
                assert f.attr.endswith("_ms"), f"{s.name}.{f.name} -> {f.attr}"


def test_layouts_are_declared_newest_first_with_distinct_labels() -> None:
    for rt in RECORD_TYPES.values():
        labels = [lay.label for lay in rt.value.layouts]
        assert len(labels) == len(set(labels)), rt.name
        for lay in rt.value.layouts:
            assert lay.struct.cls is rt.value.cls, f"{rt.name}: every layout builds the family's class"
