"""Checks shared by the decoder suites: a typed record and its JSON against the raw struct they were
encoded from, and a truncation error that names the right field and kind."""

from __future__ import annotations

import dataclasses
from typing import Any

from decoders.interpreter import UNKNOWN_TAGS
from decoders.records import DecodeError, ErrorKind
from decoders.schema import UUID, ArrayOf, Primitive, Struct
from lab.encoder import TAGS


def _check_typed(struct: Struct, raw: dict[str, Any], obj: Any, version: int) -> None:
    """Sentinel mapping, None for absent fields, tuples for arrays -- field by field."""
    for f in struct.fields:
        got = getattr(obj, f.attr)
        if version not in f.versions:
            assert got is None, f.name
            continue
        wire = raw[f.name]
        at_tag_default = f.tag is not None and not isinstance(f.type, Primitive) and wire == f.wire_default()
        if wire is None or wire in f.none_if or (f.type is UUID and wire == bytes(16)) or at_tag_default:
            assert got is None, (f.name, wire, got)
        elif isinstance(f.type, ArrayOf):
            assert isinstance(got, tuple) and len(got) == len(wire)
            if isinstance(f.type.element, Struct):
                for w, g in zip(wire, got, strict=True):
                    _check_typed(f.type.element, w, g, version)
        elif isinstance(f.type, Struct):
            _check_typed(f.type, wire, got, version)
        elif f.type is UUID:
            assert isinstance(got, str) and len(got) == 22
        else:
            assert got == wire, f.name
    if dataclasses.is_dataclass(obj) and "unknown_tags" in {x.name for x in dataclasses.fields(obj)}:
        assert obj.unknown_tags == raw.get(UNKNOWN_TAGS, ())


def _check_json(
    struct: Struct, raw: dict[str, Any], data: dict[str, Any], version: int, flexible: bool
) -> None:
    expected_keys = []
    for f in struct.fields:
        if version not in f.versions:
            continue
        if flexible and f.is_tagged_in(version) and raw[f.name] == f.wire_default():
            continue
        expected_keys.append(f.json_name)
        v = data[f.json_name]
        if isinstance(f.type, Primitive) and f.type.width is not None and f.type is not UUID:
            assert v == raw[f.name]  # ints print as their wire values, sentinels included
        if isinstance(f.type, Struct) and raw[f.name] is not None:
            _check_json(f.type, raw[f.name], v, version, flexible)
    assert list(data) == expected_keys


def _parent(path: str) -> str:
    cut = max(path.rfind("."), path.rfind("["))
    return path[:cut] if cut > 0 else ""


def assert_names_field(reported: str, expected: str, reason: str) -> None:
    """``reported`` must be the field whose bytes were cut, or -- when a guard fails fast before
    reading it -- the array containing it (count cannot fit) or its struct's tagged trailer."""
    if reported == expected:
        return
    if expected.startswith((reported + "[", reported + ".")):
        assert "cannot fit" in reason, (reported, expected, reason)
        return
    if reported.endswith(TAGS):
        # The trailer's count guard fired before reaching the tagged field itself.
        trailer_owner = reported[: -len(TAGS)].rstrip(".")
        assert _parent(expected) == trailer_owner, (reported, expected)
        assert "cannot fit" in reason, (reported, expected, reason)
        return
    raise AssertionError(f"reported field {reported!r}, expected {expected!r} ({reason})")


def assert_kind_agrees(err: DecodeError) -> None:
    """A cut record is truncated -- or malformed where a count cannot fit in what is left -- and
    the kind (the metric label) says the same as the words."""
    assert err.kind in (ErrorKind.TRUNCATED, ErrorKind.MALFORMED), err
    assert err.reason.startswith(f"{err.kind}:"), err
