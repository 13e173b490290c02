"""The vocabulary of the schema tables (`decoders.schema`): version ranges and how they print,
the fields a struct reads in sequence and in its tagged trailer per version, the ``F`` shorthand's
nullability, the names (attribute and Kafka-JSON spellings) and each type's wire default."""

from __future__ import annotations

from typing import Any

import pytest

from decoders.schema import (
    ALL,
    BYTES,
    INT32,
    INT64,
    NONE,
    STRING,
    UUID,
    ZERO_UUID,
    ArrayOf,
    F,
    Layout,
    Struct,
    ValueFamily,
    Versions,
    between,
    json_name,
    only,
    since,
    snake_case,
)


@pytest.mark.parametrize(
    ("versions", "inside", "outside", "text"),
    [
        (ALL, [0, 1, 99], [-1], "0+"),
        (since(3), [3, 4, 1000], [0, 2], "3+"),
        (only(2), [2], [1, 3], "2"),
        (between(1, 3), [1, 2, 3], [0, 4], "1-3"),
        (NONE, [], [0, 1, 2], "1-0"),
    ],
    ids=["all", "since", "only", "between", "none"],
)
def test_version_ranges_are_inclusive(
    versions: Versions, inside: list[int], outside: list[int], text: str
) -> None:
    assert all(v in versions for v in inside)
    assert not any(v in versions for v in outside)
    assert str(versions) == text


def test_only_ints_are_in_a_range() -> None:
    assert "1" not in ALL and None not in ALL and 1.0 not in ALL


# A struct like OffsetCommitValue: a field added in v1, a field gone after v1, a tagged one from v3
# (flexible versions only), in declaration order.
S = Struct(
    "S",
    (
        F("Offset", INT64),
        F("ExpireTimestamp", INT64, only(1)),
        F("Metadata", STRING, nullable=since(2)),
        F("TopicId", UUID, since(3), tag=0),
        F("Ids", ArrayOf(INT32), since(2)),
    ),
)


@pytest.mark.parametrize(
    ("version", "flexible", "regular", "tagged"),
    [
        (0, False, ["Offset", "Metadata"], []),
        (1, False, ["Offset", "ExpireTimestamp", "Metadata"], []),
        (2, False, ["Offset", "Metadata", "Ids"], []),
        (3, False, ["Offset", "Metadata", "TopicId", "Ids"], []),  # not flexible: a tag is a plain field
        (3, True, ["Offset", "Metadata", "Ids"], ["TopicId"]),
    ],
)
def test_a_structs_fields_per_version(
    version: int, flexible: bool, regular: list[str], tagged: list[str]
) -> None:
    assert [f.name for f in S.regular_fields(version, flexible)] == regular
    assert [f.name for f in S.tagged_fields(version, flexible)] == tagged


def test_a_field_is_found_by_its_kafka_name() -> None:
    assert S.field("Metadata").type is STRING
    with pytest.raises(KeyError, match="S has no field 'metadata'"):
        S.field("metadata")


def test_structs_are_equal_only_to_themselves() -> None:
    """Two structs with the same fields are different schema nodes (read plans are cached per node)."""
    twin = Struct("S", S.fields)
    assert twin != S and twin.fields == S.fields


def test_the_f_shorthands_nullability() -> None:
    assert F("A", STRING).nullable == NONE
    assert F("A", STRING, since(2), nullable=True).nullable == since(2)  # nullable wherever it exists
    assert F("A", STRING, nullable=only(4)).is_nullable_in(4) and not F(
        "A", STRING, nullable=only(4)
    ).is_nullable_in(3)
    tagged = F("A", UUID, since(3), tag=0)
    assert tagged.is_tagged_in(3) and not tagged.is_tagged_in(2)
    assert not F("A", UUID, since(3)).is_tagged_in(3)


@pytest.mark.parametrize(
    ("kafka", "attr", "json"),
    [
        ("leaderEpoch", "leader_epoch", "leaderEpoch"),
        ("GroupId", "group_id", "groupId"),
        ("PartitionsPendingRevocation", "partitions_pending_revocation", "partitionsPendingRevocation"),
        ("RebalanceTimeoutMs", "rebalance_timeout_ms", "rebalanceTimeoutMs"),
        ("MetadataHash", "metadata_hash", "metadataHash"),
    ],
)
def test_names_attribute_and_kafka_json(kafka: str, attr: str, json: str) -> None:
    assert snake_case(kafka) == attr == F(kafka, INT32).attr
    assert json_name(kafka) == json == F(kafka, INT32).json_name
    assert F(kafka, INT32, attr="custom").attr == "custom"


@pytest.mark.parametrize(
    ("field", "default"),
    [
        (F("A", INT32), 0),
        (F("A", INT64, default=-1), -1),
        (F("A", STRING), ""),
        (F("A", STRING, nullable=True), None),
        (F("A", BYTES), b""),
        (F("A", BYTES, nullable=True), None),
        (F("A", UUID), ZERO_UUID),
        (F("A", ArrayOf(INT32), nullable=True), []),  # Kafka's generator: empty, also when nullable
        (F("A", Struct("T", (F("X", INT32), F("Y", STRING))), nullable=True), {"X": 0, "Y": ""}),
        (F("A", STRING, nullable=True, default=None), None),
    ],
    ids=[
        "int",
        "declared",
        "string",
        "null-string",
        "bytes",
        "null-bytes",
        "uuid",
        "array",
        "struct",
        "declared-null",
    ],
)
def test_wire_defaults(field: Any, default: Any) -> None:
    assert field.wire_default() == default


def test_a_value_familys_layouts_per_version() -> None:
    new, old = Struct("New", ()), Struct("Old", ())
    fam = ValueFamily(
        "V", between(0, 2), since(1), (Layout("4.1+", new), Layout("4.0", old, only(1))), cls=object
    )
    assert [lay.label for lay in fam.layouts_for(1)] == ["4.1+", "4.0"]
    assert [lay.label for lay in fam.layouts_for(2)] == ["4.1+"]
    assert not fam.is_flexible(0) and fam.is_flexible(2)
    assert fam.max_version == 2
