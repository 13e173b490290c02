"""Inclusive sweep: every (record type, value version, layout) of the tables, encoded by the
test-only encoder from the same tables, decodes back to the same raw fields and typed record."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from decoders.decode import RawRecord, decode_raw, decode_record
from decoders.interpreter import UNKNOWN_TAGS
from decoders.kafka_json import record_json
from decoders.payload import payload_to_record, record_to_payload
from decoders.records import Record, Source
from decoders.schema import UUID, ArrayOf, Primitive, Struct
from decoders.tables import RECORD_TYPES

from .builders import Case, all_cases, record_strategy

CASES = list(all_cases())
SRC = Source(partition=3, offset=99, timestamp_ms=123)


def test_sweep_covers_every_version_inclusively() -> None:
    seen = {(c.rt.k, c.version, c.layout.label) for c in CASES}
    for k, rt in RECORD_TYPES.items():
        fam = rt.value
        for v in range(fam.versions.lo, fam.max_version + 1):
            for lay in fam.layouts_for(v):
                assert (k, v, lay.label) in seen
    # Offset commits V0-V4 and group metadata V0-V4 are all in there.
    assert {(c.rt.k, c.version) for c in CASES} >= {(k, v) for k in (0, 1, 2) for v in range(0, 5)}


def _check_round_trip(case: Case) -> None:
    raw = decode_raw(case.key, case.value, SRC)
    assert isinstance(raw, RawRecord), raw
    assert raw.key == case.key_raw
    assert raw.value_version == case.version
    if raw.layout is not case.layout:
        # Only possible when another (newer) layout also consumes the bytes exactly.
        assert raw.ambiguous_layout, (raw.layout, case.layout)
        return
    assert raw.value == case.value_raw

    rec = decode_record(case.key, case.value, SRC)
    assert isinstance(rec, Record)
    assert rec.source == SRC and rec.record_type == case.rt.k and rec.value_version == case.version
    assert type(rec.value) is case.rt.value.cls
    _check_typed(case.layout.struct, case.value_raw, rec.value, case.version)
    assert payload_to_record(record_to_payload(rec), rec.source) == rec

    obj, status = record_json(case.key, case.value)
    assert status == "ok"
    assert obj["key"]["type"] == case.rt.k
    assert obj["value"]["version"] == case.version
    _check_json(
        case.layout.struct,
        case.value_raw,
        obj["value"]["data"],
        case.version,
        case.rt.value.is_flexible(case.version),
    )


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


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_round_trip(case: Case) -> None:
    _check_round_trip(case)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_strategy())
def test_round_trip_random_records(case: Case) -> None:
    _check_round_trip(case)
