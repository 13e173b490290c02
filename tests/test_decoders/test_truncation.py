"""Truncation table: every proper prefix of every valid key and value fails with a DecodeError
that names the field being read when the bytes ran out (checked against the encoder's byte map)."""

from __future__ import annotations

import pytest

from decoders.decode import decode_record
from decoders.interpreter import struct_reader
from decoders.records import DecodeError, ErrorKind, Record
from decoders.wire import WireError

from .builders import Case, all_cases
from .encoder import TAGS, encode_key_spans, encode_value_spans

CASES = [c for c in all_cases() if c.variant in ("empty", "full")]


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
