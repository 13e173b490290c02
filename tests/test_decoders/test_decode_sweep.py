"""Inclusive sweep: every (record type, value version, layout) of the tables, encoded by the
test-only encoder from the same tables, decodes back to the same raw fields and typed record."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from decoders.decode import RawRecord, decode_raw, decode_record
from decoders.kafka_json import record_json
from decoders.payload import payload_to_record, record_to_payload
from decoders.records import Record, Source
from decoders.tables import RECORD_TYPES
from lab.record_samples import Case, all_cases
from tests.support.decoder_checks import _check_json, _check_typed
from tests.support.strategies import record_strategy

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


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_round_trip(case: Case) -> None:
    _check_round_trip(case)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_strategy())
def test_round_trip_random_records(case: Case) -> None:
    _check_round_trip(case)
