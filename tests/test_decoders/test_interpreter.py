"""Truncation table: every proper prefix of every valid key and value fails with a DecodeError
that names the field being read when the bytes ran out (checked against the encoder's byte map)."""

from __future__ import annotations

import pytest

from decoders.decode import decode_record
from decoders.interpreter import struct_reader
from decoders.records import DecodeError, Record
from decoders.wire import WireError
from lab.encoder import encode_key_spans, encode_value_spans
from lab.record_samples import Case, all_cases
from tests.support.decoder_checks import assert_kind_agrees, assert_names_field

CASES = [c for c in all_cases() if c.variant in ("empty", "full")]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_every_key_prefix_fails_at_a_named_field(case: Case) -> None:
    key, paths = encode_key_spans(case.rt, case.key_raw)
    for n in range(len(key)):
        err = decode_record(key[:n], None)
        assert isinstance(err, DecodeError), (n, err)
        assert err.part == "key" and err.field, err
        assert_names_field(err.field, paths[n], err.reason)
        assert_kind_agrees(err)
        assert err.record_type == (None if n < 2 else case.rt.k)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_every_value_prefix_fails_at_a_named_field(case: Case) -> None:
    value, paths = encode_value_spans(case.rt, case.version, case.value_raw, case.layout.struct)
    flexible = case.rt.value.is_flexible(case.version)
    single_layout = len(case.rt.value.layouts_for(case.version)) == 1
    for n in range(len(value)):
        prefix = value[:n]
        result = decode_record(case.key, prefix)
        if single_layout or n < 2:
            assert isinstance(result, DecodeError), (n, result)
            assert result.part == "value" and result.record_type == case.rt.k
            assert result.key is not None  # the key decoded; errors stay attributable to a group
            assert_names_field(result.field, paths[n], result.reason)
            assert_kind_agrees(result)
            continue
        # Several layouts: a prefix may be a valid record of *another* layout (that is the
        # 4.0/4.1 ambiguity); it can never decode as the layout it was cut from.
        if isinstance(result, Record):
            assert result.layout != case.layout.label
        # The interpreter on the case's own layout names the field exactly.
        with pytest.raises(WireError) as exc:
            reader = struct_reader(case.layout.struct, case.version, flexible)
            _, end = reader(prefix, 2, n)
            if end == n:  # pragma: no cover - a proper prefix cannot be complete
                raise AssertionError("a proper prefix decoded completely")
        assert_names_field(exc.value.field_path(), paths[n], exc.value.reason)


def test_truncation_table_covers_all_types() -> None:
    assert {c.rt.k for c in CASES} == {k for k in range(24) if k != 18}
