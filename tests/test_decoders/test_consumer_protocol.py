"""Embedded consumer protocol (spec §4): subscription v0-v3 (and newer read as v3), assignment
v0-v3 incl. zero length, and a broken blob never losing its group record."""

from __future__ import annotations

from typing import Any

import pytest

from decoders import records as r
from decoders.consumer_protocol import EmbeddedFailure, decode_assignment, decode_subscription
from decoders.decode import decode_record
from decoders.kafka_json import record_json
from decoders.records import Record
from decoders.tables import CONSUMER_ASSIGNMENT, CONSUMER_SUBSCRIPTION, RECORD_TYPES
from lab.encoder import encode_embedded, encode_key, encode_value

SUB_FULL: dict[str, Any] = {
    "topics": ["orders", "payments"],
    "userData": b"\x00\x01sticky",
    "ownedPartitions": [{"topic": "orders", "partitions": [0, 2]}],
    "generationId": 17,
    "rackId": "rack-a",
}
ASG_FULL: dict[str, Any] = {
    "assignedPartitions": [{"topic": "orders", "partitions": [1, 3]}],
    "userData": None,
}


def _sub(version: int, read_as: int | None = None) -> bytes:
    fields_in = read_as if read_as is not None else version
    raw = {f.name: SUB_FULL[f.name] for f in CONSUMER_SUBSCRIPTION.fields if fields_in in f.versions}
    return encode_embedded(CONSUMER_SUBSCRIPTION, version, raw, read_as=read_as)


@pytest.mark.parametrize("version", range(0, 3 + 1))
def test_subscription_versions(version: int) -> None:
    sub = decode_subscription(_sub(version))
    assert isinstance(sub, r.ConsumerSubscription)
    assert sub.version == version
    assert sub.topics == ("orders", "payments") and sub.user_data == b"\x00\x01sticky"
    assert sub.owned_partitions == ((r.ConsumerTopicPartitions("orders", (0, 2)),) if version >= 1 else None)
    assert sub.generation_id == (17 if version >= 2 else None)
    assert sub.rack_id == ("rack-a" if version >= 3 else None)


def test_subscription_newer_version_is_read_as_v3_and_trailing_bytes_ignored() -> None:
    blob = _sub(9, read_as=3) + b"\x00\x00\x00\x05future"  # v9 appended fields we do not know
    sub = decode_subscription(blob)
    assert isinstance(sub, r.ConsumerSubscription)
    assert sub.version == 9 and sub.rack_id == "rack-a" and sub.generation_id == 17


def test_subscription_generation_minus_one_is_none() -> None:
    raw = {**SUB_FULL, "generationId": -1}
    sub = decode_subscription(encode_embedded(CONSUMER_SUBSCRIPTION, 3, raw))
    assert isinstance(sub, r.ConsumerSubscription) and sub.generation_id is None


@pytest.mark.parametrize("version", [0, 1, 2, 3, 9])
def test_assignment_versions_share_one_layout(version: int) -> None:
    blob = encode_embedded(CONSUMER_ASSIGNMENT, version, ASG_FULL, read_as=min(version, 3))
    asg = decode_assignment(blob + (b"\xff" if version == 9 else b""))
    assert asg == r.ConsumerAssignment(
        version=version, assigned_partitions=(r.ConsumerTopicPartitions("orders", (1, 3)),), user_data=None
    )


def test_zero_length_assignment_is_an_empty_assignment() -> None:
    assert decode_assignment(b"") == r.ConsumerAssignment(
        version=None, assigned_partitions=(), user_data=None
    )


@pytest.mark.parametrize(
    ("blob", "field"),
    [
        (b"", "version"),
        (b"\x00", "version"),
        (b"\xff\xff", "version"),  # negative version
        (b"\x00\x00\x00\x00\x00\x02\x00\x01t\x00\x05a", "topics[1]"),  # second topic cut short
        (b"\x00\x00\x7f\xff\xff\xff", "topics"),  # absurd count fails at the count
    ],
)
def test_malformed_subscriptions(blob: bytes, field: str) -> None:
    res = decode_subscription(blob)
    assert isinstance(res, EmbeddedFailure)
    assert res.field == field


def _group(protocol_type: str, members: list[dict[str, Any]], version: int = 3) -> tuple[bytes, bytes]:
    rt = RECORD_TYPES[2]
    value = {
        "protocolType": protocol_type,
        "generation": 4,
        "protocol": "range",
        "leader": members[0]["memberId"] if members else None,
        "currentStateTimestamp": 1,
        "members": members,
    }
    raw = {f.name: value[f.name] for f in rt.value.layouts[0].struct.fields if version in f.versions}
    for m in members:
        if version < 3:
            m.pop("groupInstanceId", None)
        if version < 1:
            m.pop("rebalanceTimeout", None)
    return encode_key(rt, {"group": "g"}), encode_value(rt, version, raw)


def _member(member_id: str, subscription: bytes, assignment: bytes) -> dict[str, Any]:
    return {
        "memberId": member_id,
        "groupInstanceId": None,
        "clientId": "c",
        "clientHost": "/10.0.0.1",
        "rebalanceTimeout": 300000,
        "sessionTimeout": 45000,
        "subscription": subscription,
        "assignment": assignment,
    }


@pytest.mark.parametrize("version", range(0, 4 + 1))
def test_group_record_decodes_members_blobs(version: int) -> None:
    asg = encode_embedded(CONSUMER_ASSIGNMENT, 3, ASG_FULL)
    key, value = _group("consumer", [_member("m-1", _sub(3), asg), _member("m-2", _sub(1), b"")], version)
    rec = decode_record(key, value)
    assert isinstance(rec, Record)
    m1, m2 = rec.value.members
    assert m1.consumer_subscription is not None and m1.consumer_subscription.version == 3
    assert m1.consumer_assignment is not None and m1.consumer_assignment.version == 3
    assert m2.consumer_subscription is not None and m2.consumer_subscription.version == 1
    assert m2.consumer_assignment == r.ConsumerAssignment(version=None)  # zero-length
    assert m1.rebalance_timeout_ms == (300000 if version >= 1 else None)


def test_malformed_subscription_keeps_the_group_record() -> None:
    bad = b"\x00\x03\x00\x00\x00\x02\x00\x01t"  # v3, two topics announced, one present
    key, value = _group("consumer", [_member("ok", _sub(3), b""), _member("broken", bad, b"\x00")])
    rec = decode_record(key, value)
    assert isinstance(rec, Record), rec
    good, broken = rec.value.members
    assert good.subscription_error is None and good.consumer_subscription is not None
    assert broken.subscription == bad  # raw bytes kept
    assert broken.consumer_subscription is None
    err = broken.subscription_error
    assert err is not None
    assert (err.part, err.field, err.record_type, err.version) == (
        "subscription",
        "members[1].subscription.topics",
        2,
        3,
    )
    assert err.value_bytes == bad
    assert (
        broken.assignment_error is not None
        and broken.assignment_error.field == "members[1].assignment.version"
    )

    obj, status = record_json(key, value)
    assert status == "ok"
    extra = obj["value"]["extra"]["consumerProtocol"]["members"]
    assert extra[1]["subscription"]["error"]["field"] == "topics"
    assert obj["value"]["data"]["members"][1]["subscription"] == "AAMAAAACAAF0"  # still Kafka's base64


@pytest.mark.parametrize("protocol_type", ["connect", "", "my-custom-protocol"])
def test_other_protocol_types_keep_their_bytes(protocol_type: str) -> None:
    key, value = _group(protocol_type, [_member("w-1", b"\x00\x00\x01garbage", b"\x00\x01")])
    rec = decode_record(key, value)
    assert isinstance(rec, Record)
    (m,) = rec.value.members
    assert m.subscription == b"\x00\x00\x01garbage" and m.assignment == b"\x00\x01"
    assert m.consumer_subscription is None and m.subscription_error is None and m.assignment_error is None
    assert rec.value.protocol_type == (protocol_type or None)
    obj, _ = record_json(key, value)
    assert "extra" not in obj["value"]
