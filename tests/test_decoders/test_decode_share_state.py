"""`__share_group_state` (KIP-932's share coordinator): ShareSnapshot (K=0) and ShareUpdate (K=1),
every value layout the 4.x brokers write, from the same tables and the same interpreter.

Inclusive sweep and hypothesis round trips through the test-only encoder, the truncation table,
the 4.0 / 4.1+ layouts of V0, the sentinels, and the registry itself (the same K means something
else in `__consumer_offsets`).  Real bytes: tests/vectors/kafka-4.3.1-share-state.json
(test_kafka_json.py) and the live broker (test_decode_share_state_broker.py)."""

from __future__ import annotations

import struct
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decoders import decode_record, decode_share_state_record
from decoders.decode import RawRecord, decode_raw
from decoders.interpreter import struct_reader
from decoders.kafka_json import record_json
from decoders.records import (
    DecodeError,
    ErrorKind,
    Record,
    SharePartitionKey,
    ShareSnapshotValue,
    ShareStateBatch,
    ShareUpdateValue,
    Source,
    UnknownRecord,
)
from decoders.tables import RECORD_TYPES, REGISTRIES, SHARE_GROUP_STATE_TOPIC, SHARE_STATE_RECORD_TYPES
from decoders.wire import WireError
from lab.encoder import encode_key_spans, encode_value_spans, uvarint
from lab.record_samples import Case, all_cases
from tests.support.decoder_checks import _check_json, _check_typed, assert_kind_agrees, assert_names_field
from tests.support.strategies import record_strategy

CASES = list(all_cases(SHARE_STATE_RECORD_TYPES))
SRC = Source(partition=7, offset=42, timestamp_ms=1_764_000_000_000)
TOPIC_ID = bytes(range(1, 17))


def test_sweep_covers_every_type_version_and_layout() -> None:
    seen = {(c.rt.k, c.version, c.layout.label) for c in CASES}
    want = {
        (k, v, lay.label)
        for k, rt in SHARE_STATE_RECORD_TYPES.items()
        for v in range(rt.value.versions.lo, rt.value.max_version + 1)
        for lay in rt.value.layouts_for(v)
    }
    assert seen == want == {(0, 0, "4.1+"), (0, 0, "4.0"), (1, 0, "4.1+"), (1, 0, "4.0")}
    assert REGISTRIES[SHARE_GROUP_STATE_TOPIC] is SHARE_STATE_RECORD_TYPES
    assert REGISTRIES["__consumer_offsets"] is RECORD_TYPES


def _round_trip(case: Case) -> None:
    raw = decode_raw(case.key, case.value, SRC, SHARE_STATE_RECORD_TYPES)
    assert isinstance(raw, RawRecord), raw
    assert raw.key == case.key_raw and raw.value_version == case.version
    if raw.layout is not case.layout:
        assert raw.ambiguous_layout, (raw.layout, case.layout)  # only when a newer layout fits too
        return
    assert raw.value == case.value_raw
    rec = decode_share_state_record(case.key, case.value, SRC)
    assert isinstance(rec, Record) and rec.source == SRC and rec.record_type == case.rt.k
    assert type(rec.key) is SharePartitionKey and type(rec.value) is case.rt.value.cls
    assert rec.layout == case.layout.label
    _check_typed(case.layout.struct, case.value_raw, rec.value, case.version)
    obj, status = record_json(case.key, case.value, registry=SHARE_STATE_RECORD_TYPES)
    assert status == "ok" and obj["key"]["type"] == case.rt.k and obj["value"]["version"] == 0
    assert obj["value"]["extra"]["layout"] == case.layout.label
    _check_json(case.layout.struct, case.value_raw, obj["value"]["data"], 0, True)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_round_trip(case: Case) -> None:
    _round_trip(case)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_strategy(registry=SHARE_STATE_RECORD_TYPES))
def test_round_trip_random_records(case: Case) -> None:
    _round_trip(case)


@pytest.mark.parametrize("case", [c for c in CASES if c.variant in ("empty", "full")], ids=lambda c: c.id)
def test_every_prefix_fails_at_a_named_field(case: Case) -> None:
    key, key_paths = encode_key_spans(case.rt, case.key_raw)
    for n in range(len(key)):
        err = decode_share_state_record(key[:n], None)
        assert isinstance(err, DecodeError) and err.part == "key", (n, err)
        assert_names_field(err.field, key_paths[n], err.reason)
        assert_kind_agrees(err)
    value, paths = encode_value_spans(case.rt, 0, case.value_raw, case.layout.struct)
    for n in range(len(value)):
        result = decode_share_state_record(case.key, value[:n])
        if isinstance(result, Record):
            # a prefix of a 4.1 value can be a whole 4.0 value (two layouts of V0), never its own
            assert result.layout != case.layout.label
        else:
            assert isinstance(result, DecodeError) and result.part == "value", (n, result)
            assert result.key == SharePartitionKey(*_key_fields(case))  # attributable to its group
            if n < 2:
                assert_kind_agrees(result)
            else:  # two candidate layouts, neither fits: the furthest one's error, named as such
                assert result.kind is ErrorKind.NO_LAYOUT and "4.1+, 4.0" in result.reason, result
        if n >= 2:
            with pytest.raises(WireError) as exc:
                _, end = struct_reader(case.layout.struct, 0, True)(value[:n], 2, n)
                if end == n:  # pragma: no cover - a proper prefix cannot be complete
                    raise AssertionError("a proper prefix decoded completely")
            assert_names_field(exc.value.field_path(), paths[n], exc.value.reason)


def _key_fields(case: Case) -> tuple[str, str | None, int]:
    rec = decode_share_state_record(case.key, None)
    assert isinstance(rec, Record)
    return rec.key.group_id, rec.key.topic_id, rec.key.partition


# ------------------------------------------------------------------------------- hand-made bytes
def _key(k: int, group: str = "sg", partition: int = 3) -> bytes:
    g = group.encode()
    return struct.pack(">hh", k, len(g)) + g + TOPIC_ID + struct.pack(">i", partition)


def _batches(*rows: tuple[int, int, int, int]) -> bytes:
    out = uvarint(len(rows) + 1)
    for first, last, state, count in rows:
        out += struct.pack(">qqbh", first, last, state, count) + uvarint(0)
    return out


def _tags(dcc: int | None) -> bytes:
    if dcc is None:
        return uvarint(0)
    return uvarint(1) + uvarint(0) + uvarint(4) + struct.pack(">i", dcc)


def snapshot_41(
    epoch: int, start: int, batches: bytes, dcc: int | None, *, created: int = 1, written: int = 2
) -> bytes:
    # SnapshotEpoch, StateEpoch, LeaderEpoch, StartOffset, CreateTimestamp, WriteTimestamp,
    # StateBatches; DeliveryCompleteCount is tag 0 in the trailer
    head = struct.pack(">hiiiqqq", 0, epoch, 0, 4, start, created, written)
    return head + batches + _tags(dcc)


def snapshot_40(epoch: int, start: int, batches: bytes) -> bytes:
    return struct.pack(">hHiiq", 0, epoch, 0, 4, start) + batches + uvarint(0)


def update_41(start: int, batches: bytes, dcc: int | None, leader: int = 4) -> bytes:
    return struct.pack(">hiiq", 0, 1, leader, start) + batches + _tags(dcc)


def update_40(start: int, batches: bytes) -> bytes:
    return struct.pack(">hHiq", 0, 1, 4, start) + batches + uvarint(0)


def test_a_41_snapshot_reads_every_field_and_maps_sentinels() -> None:
    value = snapshot_41(2, 100, _batches((100, 104, 2, 1), (105, 105, 4, 5), (106, 109, 0, 2)), 6)
    rec = decode_share_state_record(_key(0), value, SRC)
    assert isinstance(rec, Record) and rec.layout == "4.1+" and not rec.ambiguous_layout
    assert rec.key == SharePartitionKey("sg", "AQIDBAUGBwgJCgsMDQ4PEA", 3)
    assert rec.value == ShareSnapshotValue(
        snapshot_epoch=2,
        state_epoch=0,
        leader_epoch=4,
        start_offset=100,
        state_batches=(
            ShareStateBatch(100, 104, 2, 1),
            ShareStateBatch(105, 105, 4, 5),
            ShareStateBatch(106, 109, 0, 2),
        ),
        delivery_complete_count=6,
        create_timestamp_ms=1,
        write_timestamp_ms=2,
    )
    # uninitialised start offset and no DeliveryCompleteCount (a 4.1 broker, or -1): None
    fresh = decode_share_state_record(_key(0), snapshot_41(0, -1, _batches(), None), SRC)
    assert isinstance(fresh, Record) and isinstance(fresh.value, ShareSnapshotValue)
    assert fresh.value.start_offset is None and fresh.value.delivery_complete_count is None
    obj, _ = record_json(_key(0), snapshot_41(0, -1, _batches(), None), registry=SHARE_STATE_RECORD_TYPES)
    assert obj["value"]["data"]["startOffset"] == -1  # the JSON keeps wire values, as Kafka prints
    assert "deliveryCompleteCount" not in obj["value"]["data"]  # a tag at its default: not printed


def test_the_40_layout_has_a_uint16_epoch_and_no_timestamps() -> None:
    rec = decode_share_state_record(_key(0), snapshot_40(65535, 7, _batches((7, 9, 0, 1))), SRC)
    assert isinstance(rec, Record) and rec.layout == "4.0"
    assert isinstance(rec.value, ShareSnapshotValue)
    assert rec.value.snapshot_epoch == 65535  # unsigned
    assert rec.value.create_timestamp_ms is None and rec.value.write_timestamp_ms is None
    upd = decode_share_state_record(_key(1), update_40(-1, _batches((9, 9, 2, 1))), SRC)
    assert isinstance(upd, Record) and upd.layout == "4.0"
    assert upd.value == ShareUpdateValue(1, 4, None, (ShareStateBatch(9, 9, 2, 1),))


def test_an_update_reads_unchanged_markers_as_none() -> None:
    rec = decode_share_state_record(_key(1), update_41(-1, _batches((5, 6, 0, 2)), None, leader=-1), SRC)
    assert isinstance(rec, Record) and rec.layout == "4.1+"
    assert rec.value == ShareUpdateValue(1, None, None, (ShareStateBatch(5, 6, 0, 2),), None)


def test_tombstones_unknown_types_and_versions() -> None:
    tomb = decode_share_state_record(_key(0), None, SRC)
    assert isinstance(tomb, Record) and tomb.value is None and tomb.key.partition == 3
    unknown = decode_share_state_record(_key(2), b"\x00\x00", SRC)
    assert isinstance(unknown, UnknownRecord) and unknown.record_type == 2
    bad = decode_share_state_record(_key(1), b"\x00\x01" + b"\x00" * 20, SRC)
    assert isinstance(bad, DecodeError) and bad.kind is ErrorKind.UNKNOWN_VERSION and bad.field == "version"
    assert bad.key == SharePartitionKey("sg", "AQIDBAUGBwgJCgsMDQ4PEA", 3)
    trailing = decode_share_state_record(_key(0), snapshot_41(1, 0, _batches(), None) + b"\x00", SRC)
    assert isinstance(trailing, DecodeError) and trailing.kind is ErrorKind.NO_LAYOUT


def test_the_registry_decides_what_k_means() -> None:
    """A ShareSnapshot key read as `__consumer_offsets` is a (broken) K=0 offset commit."""
    value = snapshot_41(1, 0, _batches(), None)
    assert isinstance(decode_share_state_record(_key(0), value), Record)
    as_offsets = decode_record(_key(0), value)
    assert isinstance(as_offsets, DecodeError) and as_offsets.part == "key"


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=80), st.one_of(st.none(), st.binary(max_size=120)))
def test_arbitrary_bytes_never_raise(key: bytes, value: bytes | None) -> None:
    out = decode_share_state_record(key, value, SRC)
    assert isinstance(out, Record | UnknownRecord | DecodeError)
    obj, status = record_json(key, value, registry=SHARE_STATE_RECORD_TYPES)
    assert status in ("ok", "unknown", "error") and obj


def test_decode_command_reads_share_state_bytes() -> None:
    value = snapshot_41(3, 10, _batches((10, 11, 2, 1)), 2)
    proc = subprocess.run(
        [sys.executable, "-m", "streaming.app.cli", "decode", "--topic", SHARE_GROUP_STATE_TOPIC,
         "--key", _key(0).hex(), "--value", value.hex()],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert '"snapshotEpoch":3' in proc.stdout and '"deliveryCompleteCount":2' in proc.stdout
    # without --topic the same bytes are __consumer_offsets bytes: undecodable (exit 4)
    proc = subprocess.run(
        [sys.executable, "-m", "streaming.app.cli", "decode", "--key", _key(0).hex(), "--value", value.hex()],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 4
