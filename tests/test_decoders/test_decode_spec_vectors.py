"""Spec §9 vectors V1-V16 decode to the expected *typed* fields (sentinels -> None, *_ms names)."""

from __future__ import annotations

from decoders import records as r
from decoders.consumer_protocol import decode_assignment, decode_subscription
from decoders.decode import decode_record
from decoders.records import Record, Source


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", "").replace("|", ""))


T = 1700000000000
SRC = Source(partition=7, offset=42, timestamp_ms=T + 5)
K1 = h("00 01 | 00 01 67 | 00 01 74 | 00 00 00 00")
K0 = h("00 00 | 00 01 67 | 00 01 74 | 00 00 00 00")
K2 = h("00 02 | 00 01 67")
V10 = h("00 03 | 00 00 00 01 | 00 01 74 | ff ff ff ff | 00 00 00 00 | ff ff ff ff | ff ff")
V11 = h("00 03 | 00 00 00 01 | 00 01 74 | 00 00 00 01 | 00 00 00 00 | ff ff ff ff")


def ok(key: bytes, value: bytes | None) -> Record:  # type: ignore[type-arg]
    rec = decode_record(key, value, SRC)
    assert isinstance(rec, Record), rec
    assert rec.source == SRC
    return rec


def test_v1_offset_commit_keys() -> None:
    for raw_key, k in ((K1, 1), (K0, 0)):
        rec = ok(raw_key, None)
        assert rec.record_type == k
        assert rec.key == r.OffsetCommitKey(group_id="g", topic="t", partition=0)
        assert rec.is_tombstone and rec.value_version is None


def test_v2_group_metadata_key() -> None:
    assert ok(K2, None).key == r.GroupKey(group_id="g")


def test_v3_offset_commit_v3() -> None:
    rec = ok(K1, h("00 03 | 00 00 00 00 00 00 00 64 | ff ff ff ff | 00 00 | 00 00 01 8b cf e5 68 00"))
    assert rec.value_version == 3
    assert rec.value == r.OffsetCommitValue(
        offset=100,
        leader_epoch=None,
        metadata=None,
        commit_timestamp_ms=T,
        expire_timestamp_ms=None,
        topic_id=None,
    )


def test_v4_offset_commit_v1_expire_timestamp() -> None:
    rec = ok(
        K1, h("00 01 | 00 00 00 00 00 00 00 64 | 00 00 | 00 00 01 8b cf e5 68 00 | 00 00 01 8b f3 f1 ec 00")
    )
    assert rec.value.expire_timestamp_ms == 1700604800000
    assert rec.value.leader_epoch is None  # no such field in V1


def test_v5_v6_offset_commit_v4() -> None:
    base = "00 04 | 00 00 00 00 00 00 00 64 | 00 00 00 05 | 01 | 00 00 01 8b cf e5 68 00"
    v5 = ok(K1, h(base + "| 00")).value
    assert (v5.offset, v5.leader_epoch, v5.metadata, v5.commit_timestamp_ms, v5.topic_id) == (
        100,
        5,
        None,
        T,
        None,
    )
    v6 = ok(K1, h(base + "| 01 | 00 | 10 | 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f 10")).value
    assert v6.topic_id == "AQIDBAUGBwgJCgsMDQ4PEA"
    assert v6.unknown_tags == ()


def test_v7_legacy_value() -> None:
    rec = ok(K0, h("00 00 | 00 00 00 00 00 00 00 64 | 00 00 | 00 00 01 8b cf e5 68 00"))
    assert rec.record_type == 0 and rec.value_version == 0
    assert rec.value.offset == 100 and rec.value.commit_timestamp_ms == T


def test_v8_v9_empty_group() -> None:
    v8 = ok(
        K2,
        h(
            "00 03 | 00 08 63 6f 6e 73 75 6d 65 72 | 00 00 00 01 | ff ff | ff ff |"
            "00 00 01 8b cf e5 68 00 | 00 00 00 00"
        ),
    )
    v9 = ok(
        K2,
        h("00 04 | 09 63 6f 6e 73 75 6d 65 72 | 00 00 00 01 | 00 | 00 | 00 00 01 8b cf e5 68 00 | 01 | 00"),
    )
    for rec in (v8, v9):
        assert rec.value == r.GroupMetadataValue(
            protocol_type="consumer",
            generation=1,
            protocol=None,
            leader=None,
            current_state_timestamp_ms=T,
            members=(),
        )


def test_v10_v11_embedded() -> None:
    sub = decode_subscription(V10)
    assert sub == r.ConsumerSubscription(
        version=3, topics=("t",), user_data=None, owned_partitions=(), generation_id=None, rack_id=None
    )
    asg = decode_assignment(V11)
    assert asg == r.ConsumerAssignment(
        version=3, assigned_partitions=(r.ConsumerTopicPartitions("t", (0,)),), user_data=None
    )


def test_v12_group_with_member() -> None:
    value = (
        h(
            "00 03 | 00 08 63 6f 6e 73 75 6d 65 72 | 00 00 00 01 | 00 05 72 61 6e 67 65 | 00 01 6d |"
            "00 00 01 8b cf e5 68 00 | 00 00 00 01 |"
            "00 01 6d | ff ff | 00 01 63 | 00 02 2f 68 | 00 04 93 e0 | 00 00 af c8 | 00 00 00 17"
        )
        + V10
        + h("00 00 00 15")
        + V11
    )
    assert len(value) == 110
    rec = ok(K2, value)
    (m,) = rec.value.members
    assert (m.member_id, m.group_instance_id, m.client_id, m.client_host) == ("m", None, "c", "/h")
    assert (m.rebalance_timeout_ms, m.session_timeout_ms) == (300000, 45000)
    assert m.subscription == V10 and m.assignment == V11
    assert m.consumer_subscription is not None and m.consumer_subscription.topics == ("t",)
    assert m.consumer_assignment is not None
    assert m.consumer_assignment.assigned_partitions == (r.ConsumerTopicPartitions("t", (0,)),)
    assert m.subscription_error is None and m.assignment_error is None


def test_v13_consumer_group_metadata() -> None:
    key = h("00 03 | 00 01 67")
    assert ok(key, h("00 00 | 00 00 00 05 | 00")).value == r.ConsumerGroupMetadataValue(
        epoch=5, metadata_hash=None
    )
    tagged = ok(key, h("00 00 | 00 00 00 05 | 01 | 00 | 08 | 01 02 03 04 05 06 07 08"))
    assert tagged.value.metadata_hash == 0x0102030405060708


def test_v14_current_member_assignment() -> None:
    rec = ok(
        h("00 08 | 00 01 67 | 00 01 6d"),
        h(
            "00 00 | 00 00 00 05 | 00 00 00 04 | 00 |"
            "02 | 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f 10 |"
            "03 | 00 00 00 00 | 00 00 00 01 | 00 | 01 | 00"
        ),
    )
    assert rec.key == r.MemberKey("g", "m")
    v = rec.value
    assert (v.member_epoch, v.previous_member_epoch, v.state) == (5, 4, 0)
    assert v.assigned_partitions == (r.TopicIdPartitions("AQIDBAUGBwgJCgsMDQ4PEA", (0, 1)),)
    assert v.partitions_pending_revocation == ()
    assert rec.layout == "3.8+" and not rec.ambiguous_layout


def test_v15_member_metadata_with_and_without_classic_tag() -> None:
    base = "00 00 | 00 | 00 | 02 63 | 03 2f 68 | 02 02 74 | 00 | 00 04 93 e0 | 08 75 6e 69 66 6f 72 6d"
    key = h("00 05 | 00 01 67 | 00 01 6d")
    plain = ok(key, h(base + "| 00")).value
    assert plain.instance_id is None and plain.rack_id is None
    assert (plain.client_id, plain.client_host, plain.subscribed_topic_names) == ("c", "/h", ("t",))
    assert plain.rebalance_timeout_ms == 300000 and plain.server_assignor == "uniform"
    assert plain.classic_member_metadata is None
    classic = ok(
        key, h(base + "| 01 | 00 | 11 | 01 | 00 00 af c8 | 02 | 06 72 61 6e 67 65 | 03 00 00 | 00 | 00")
    ).value
    assert classic.classic_member_metadata == r.ClassicMemberMetadata(
        session_timeout_ms=45000, supported_protocols=(r.ClassicProtocol("range", b"\x00\x00"),)
    )


def test_v16_tombstones_for_every_type() -> None:
    from decoders.tables import RECORD_TYPES
    from lab.encoder import encode_key
    from lab.record_samples import sample_struct

    for k, rt in RECORD_TYPES.items():
        rec = ok(encode_key(rt, sample_struct(rt.key, 0, False, "full")), None)
        assert rec.record_type == k and rec.is_tombstone and rec.value is None and rec.value_version is None
