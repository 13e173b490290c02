"""Tagged nullable structs/arrays: Kafka's default is an EMPTY struct/list, not null.

Found by the oracle on real 3.9.2 bytes (tests/vectors/kafka-3.9.2-kip848-preview.json): the new
group coordinator writes ``ClassicMemberMetadata`` = null for every KIP-848 member as tag 0 with
the null marker (``01 | 00 01 00``), and Kafka's converter prints ``"classicMemberMetadata": null``
-- it prints a tagged field whenever it differs from its default, and the generated default of
a struct field is ``new ClassicMemberMetadata()`` (of an array field, an empty list) unless the
spec declares ``"default": "null"``.  Phase 1 assumed null defaults and dropped the null.
"""

from __future__ import annotations

from decoders import decode_record, record_json
from decoders.tables import RECORD_TYPES

# A real K=5 value written by Kafka 3.9.2 (KIP-848 preview) for a Java consumer-protocol member.
K5_KEY = bytes.fromhex("0005" + "000d" + b"kip848-java-x".hex() + "0016" + b"TidtJH6gRUab85a7mPukIA".hex())
K5_NULL_TAG = bytes.fromhex(
    "000000000d636d2d6b3834386a2d302d780b2f3132372e302e302e31020a6b3834386a2d742d7801000493e00001000100"
)
# The same value without the trailer entry (what a writer holding the default empty struct writes).
K5_NO_TAG = K5_NULL_TAG[:-4] + b"\x00"


def test_key_fixture_is_a_k5_key() -> None:
    obj, status = record_json(K5_KEY, None)
    assert status == "ok" and obj["key"]["type"] == 5


def test_explicit_null_tag_prints_null_like_kafka() -> None:
    obj, status = record_json(K5_KEY, K5_NULL_TAG)
    assert status == "ok"
    data = obj["value"]["data"]
    assert "classicMemberMetadata" in data and data["classicMemberMetadata"] is None
    assert data["subscribedTopicRegex"] == ""  # 3.9 writes "" where 4.x would write null


def test_absent_tag_is_the_default_and_not_printed() -> None:
    obj, status = record_json(K5_KEY, K5_NO_TAG)
    assert status == "ok"
    assert "classicMemberMetadata" not in obj["value"]["data"]


def test_typed_record_is_none_either_way() -> None:
    for value in (K5_NULL_TAG, K5_NO_TAG):
        rec = decode_record(K5_KEY, value)
        assert rec.value.classic_member_metadata is None  # type: ignore[union-attr]


def test_generated_defaults_are_empty_not_null() -> None:
    k5 = RECORD_TYPES[5].value.layouts[0].struct
    assert k5.field("ClassicMemberMetadata").wire_default() == {
        "SessionTimeoutMs": 0,
        "SupportedProtocols": [],
    }
    k8_tp = RECORD_TYPES[8].value.layouts[0].struct.field("AssignedPartitions").type.element  # type: ignore[union-attr]
    assert k8_tp.field("AssignmentEpochs").wire_default() == []
    k17 = RECORD_TYPES[17].value.layouts[0].struct
    assert k17.field("LastAssignmentConfigs").wire_default() == []
