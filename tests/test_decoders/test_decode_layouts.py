"""Layouts that share a version: share-group K=9 (3.9 vs 4.0), K=11 and K=15 (4.0 vs 4.1), and
the 3.7 early-access KIP-848 layouts of K=4, 5, 7, 8.  Rule: try each candidate, keep those that
consume the bytes exactly, prefer the newest, flag ``ambiguous_layout`` when several fit."""

from __future__ import annotations

import pyarrow as pa
import pytest

from decoders import records as r
from decoders.batch import decode_arrow
from decoders.decode import decode_record
from decoders.kafka_json import record_json
from decoders.records import DecodeError, ErrorKind, Record
from decoders.tables import RECORD_TYPES
from lab.encoder import encode_key, encode_value
from lab.record_samples import sample_struct

MULTI = {k: rt for k, rt in RECORD_TYPES.items() if len(rt.value.layouts) > 1}


def test_which_types_have_alternative_layouts() -> None:
    assert sorted(MULTI) == [4, 5, 7, 8, 9, 11, 15]


def _key(k: int) -> bytes:
    rt = RECORD_TYPES[k]
    return encode_key(rt, sample_struct(rt.key, 0, False, "full"))


@pytest.mark.parametrize(
    ("k", "label"), [(k, lay.label) for k, rt in MULTI.items() for lay in rt.value.layouts]
)
@pytest.mark.parametrize("variant", ["empty", "full"])
def test_each_layout_is_recognised(k: int, label: str, variant: str) -> None:
    rt = RECORD_TYPES[k]
    (layout,) = [lay for lay in rt.value.layouts if lay.label == label]
    value = encode_value(rt, 0, sample_struct(layout.struct, 0, True, variant), layout.struct)
    rec = decode_record(_key(k), value)
    assert isinstance(rec, Record), rec
    assert rec.layout == label and not rec.ambiguous_layout


def test_share_group_metadata_40_vs_41() -> None:
    key = _key(11)
    v40 = decode_record(key, bytes.fromhex("0000" + "00000007" + "00"))
    assert isinstance(v40, Record)
    assert v40.value == r.ShareGroupMetadataValue(epoch=7, metadata_hash=None) and v40.layout == "3.9-4.0"
    v41 = decode_record(key, bytes.fromhex("0000" + "00000007" + "0102030405060708" + "00"))
    assert isinstance(v41, Record)
    assert (
        v41.value == r.ShareGroupMetadataValue(epoch=7, metadata_hash=0x0102030405060708)
        and v41.layout == "4.1+"
    )


def test_ambiguous_bytes_choose_the_newest_layout_and_say_so() -> None:
    # 4.0 reading: Epoch 7 + one unknown tag (5) of 6 bytes.  4.1 reading: Epoch 7 +
    # MetadataHash 0x010506aabbccddee + empty trailer.  Both consume all 13 bytes.
    value = bytes.fromhex("0000" + "00000007" + "01" + "05" + "06" + "aabbccddee00")
    rec = decode_record(_key(11), value)
    assert isinstance(rec, Record)
    assert rec.layout == "4.1+" and rec.ambiguous_layout
    assert rec.value.metadata_hash == 0x010506AABBCCDDEE
    obj, _ = record_json(_key(11), value)
    assert obj["value"]["extra"] == {"layout": "4.1+", "ambiguousLayout": True}
    batch = pa.record_batch(
        {"key": [_key(11)], "value": [value], "partition": [0], "offset": [0], "timestamp": [0]},
    )
    out = decode_arrow(batch)
    assert out.column("ambiguous_layout").to_pylist() == [True]
    assert out.column("status").to_pylist() == ["ok"]


def test_share_state_partition_metadata_40_vs_41() -> None:
    key = _key(15)
    v40 = decode_record(key, bytes.fromhex("0000" + "01" + "01" + "00"))
    assert isinstance(v40, Record) and v40.layout == "4.0"
    assert v40.value == r.ShareGroupStatePartitionMetadataValue(
        initialized_topics=(), deleting_topics=(), initializing_topics=None
    )
    v41 = decode_record(key, bytes.fromhex("0000" + "01" + "01" + "01" + "00"))
    assert isinstance(v41, Record) and v41.layout == "4.1+"
    assert v41.value.initializing_topics == ()


def test_share_partition_metadata_39_vs_40() -> None:
    key = _key(9)
    v40 = decode_record(key, bytes.fromhex("0000" + "01" + "00"))
    assert isinstance(v40, Record) and v40.layout == "4.0" and v40.value.topics == ()
    v39 = decode_record(key, bytes.fromhex("0000" + "01" + "01" + "00"))
    assert isinstance(v39, Record) and v39.layout == "3.9"
    assert v39.value.initialized_topics == () and v39.value.deleting_topics == () and v39.value.topics is None


def test_early_access_member_assignment() -> None:
    # 3.7: MemberEpoch, PreviousMemberEpoch, TargetMemberEpoch, 3 x [], Error, MetadataVersion, MetadataBytes.
    value = bytes.fromhex(
        "0000" + "00000005" + "00000004" + "00000006" + "01" + "01" + "01" + "00" + "0001" + "01" + "00"
    )
    rec = decode_record(_key(8), value)
    assert isinstance(rec, Record) and rec.layout == "3.7-early-access"
    v = rec.value
    assert (v.member_epoch, v.previous_member_epoch, v.target_member_epoch, v.state) == (5, 4, 6, None)
    assert v.partitions_pending_assignment == () and v.metadata_version == 1 and v.metadata_bytes == b""


def test_no_layout_fits_reports_the_furthest_failure() -> None:
    err = decode_record(_key(11), bytes.fromhex("0000" + "00000007" + "0102"))
    assert isinstance(err, DecodeError)
    assert err.reason.startswith("no candidate layout (4.1+, 3.9-4.0) fits")
    assert err.kind is ErrorKind.NO_LAYOUT
    assert err.field in ("MetadataHash", "_taggedFields")
