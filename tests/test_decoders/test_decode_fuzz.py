"""Hypothesis: arbitrary and mutated bytes never raise past the decoder (`decoders.decode`) and
never loop.  The columnar fast path's agreement with the scalar interpreter: test_columnar.py."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decoders.decode import decode_record
from decoders.kafka_json import record_json
from decoders.records import DecodeError, Record, UnknownRecord
from decoders.schema import STRING
from decoders.tables import RECORD_TYPES
from lab.encoder import encode_key
from lab.record_samples import Case
from tests.support.strategies import mutated, record_strategy

PER_RECORD = settings(max_examples=400, deadline=2000, suppress_health_check=[HealthCheck.too_slow])


def _check_result(key: bytes, value: bytes | None) -> None:
    res = decode_record(key, value)
    assert isinstance(res, Record | UnknownRecord | DecodeError)
    if isinstance(res, DecodeError):
        assert res.reason and res.part in ("key", "value") and res.position >= 0
    obj, status = record_json(key, value)
    assert status in ("ok", "unknown", "error")
    json.dumps(obj)


@PER_RECORD
@given(st.binary(max_size=64), st.one_of(st.none(), st.binary(max_size=128)))
def test_arbitrary_bytes_never_raise(key: bytes, value: bytes | None) -> None:
    _check_result(key, value)


@PER_RECORD
@given(st.sampled_from(sorted(RECORD_TYPES)), st.binary(max_size=200))
def test_arbitrary_values_of_every_known_type_never_raise(k: int, tail: bytes) -> None:
    rt = RECORD_TYPES[k]
    key = encode_key(rt, {f.name: "g" if f.type is STRING else 0 for f in rt.key.fields})
    _check_result(key, b"\x00\x00" + tail)  # version 0 exists for every type


@PER_RECORD
@given(st.data())
def test_mutated_records_never_raise(data: st.DataObject) -> None:
    case: Case = data.draw(record_strategy())
    key = data.draw(st.one_of(st.just(case.key), mutated(case.key)))
    value = data.draw(st.one_of(st.just(case.value), mutated(case.value)))
    _check_result(key, value)
