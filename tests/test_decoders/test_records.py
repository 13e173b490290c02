"""The typed records (`decoders.records`) keep the conventions their docstring promises, checked
over every record class and over real decoded records of every type, version and layout: frozen
and slotted, hashable (arrays are tuples), timestamps and durations named ``*_ms``; a tombstone is
a record with no value; `ErrorKind` is the closed set the metric label counts."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

from decoders import records
from decoders.decode import decode_record
from decoders.records import NO_SOURCE, ErrorKind, Record, Source
from lab.record_samples import all_cases
from tests.support.records import commit_key, group_key

CLASSES = [
    cls
    for _, cls in inspect.getmembers(records, inspect.isclass)
    if cls.__module__ == records.__name__ and dataclasses.is_dataclass(cls)
]


def test_every_record_class_is_a_frozen_slotted_dataclass() -> None:
    assert len(CLASSES) > 40  # every key and value class, not an empty sweep
    for cls in CLASSES:
        params = cls.__dataclass_params__  # type: ignore[attr-defined]
        assert params.frozen, cls.__name__
        assert "__slots__" in cls.__dict__, cls.__name__


def test_time_fields_are_named_in_ms() -> None:
    """No field named like a time without its unit (``timestamp``, ``*_timeout``, ``*_time``)."""
    for cls in CLASSES:
        for f in dataclasses.fields(cls):
            name = f.name
            if any(word in name for word in ("timestamp", "timeout", "_time", "interval")):
                assert name.endswith("_ms"), f"{cls.__name__}.{name}"


def _walk(obj: Any) -> list[Any]:
    """Every value nested in a record (dataclass fields, tuple items)."""
    out = [obj]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            out += _walk(getattr(obj, f.name))
    elif isinstance(obj, tuple):
        for item in obj:
            out += _walk(item)
    return out


@pytest.mark.parametrize("case", list(all_cases()), ids=lambda c: c.id)
def test_decoded_records_are_immutable_and_hashable(case: Any) -> None:
    rec = decode_record(case.key, case.value, Source(1, 2, 3))
    assert isinstance(rec, Record), rec
    assert not any(isinstance(v, list | dict | set | bytearray) for v in _walk(rec))
    hash(rec)
    with pytest.raises(dataclasses.FrozenInstanceError):
        rec.record_type = 99  # type: ignore[misc]


@pytest.mark.parametrize(
    ("key", "value", "tombstone"),
    [
        (commit_key("g", "t", 0), None, True),
        (group_key("g"), None, True),
        (
            commit_key("g", "t", 0),
            bytes.fromhex("0003" + "0000000000000064" + "ffffffff" + "0000" + "0000018bcfe56800"),
            False,
        ),
    ],
    ids=["offset-tombstone", "group-tombstone", "offset-commit"],
)
def test_a_tombstone_is_a_record_without_value(key: bytes, value: bytes | None, tombstone: bool) -> None:
    rec = decode_record(key, value)
    assert isinstance(rec, Record)
    assert rec.is_tombstone is tombstone
    assert rec.source == NO_SOURCE  # bytes read from no log
    if not tombstone:
        assert rec.value.leader_epoch is None  # the -1 sentinel, mapped once at the edge


def test_error_kinds_are_the_metric_labels() -> None:
    """A closed set of short lower-case labels: adding one is a change to the metric's values
    (docs/operating.md lists them for ``GET /errors``)."""
    assert [k.value for k in ErrorKind] == [
        "truncated",
        "malformed",
        "trailing_bytes",
        "unknown_version",
        "no_layout",
        "internal",
    ]
    assert ErrorKind("malformed") is ErrorKind.MALFORMED and str(ErrorKind.TRUNCATED) == "truncated"
