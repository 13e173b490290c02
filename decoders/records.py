"""The typed, frozen results of decoding: one record envelope, key/value classes, errors as data.

Design (see decoders/README.md "Why frozen slotted dataclasses"): every class here is a
``@dataclass(frozen=True, slots=True)``.  Construction is a plain ``__init__`` with no validation,
which is what the hot path needs (pydantic v2 validation costs microseconds per model; these cost
well under one).  Validation happens once, in the wire interpreter, against our schema tables.

Conventions at this edge (STYLE "Decode at the edge"):
* wire sentinels are mapped to ``None`` once: leaderEpoch -1, expireTimestamp -1 or absent,
  currentStateTimestamp -1, RebalanceTimeoutMs -1, zero UUIDs, null strings, "" metadata /
  protocolType, tagged fields at their "not set" default;
* timestamps and durations are ints named ``*_ms``;
* UUIDs are ``str`` in Kafka's own rendering (22-char URL-safe base64, no padding), which is what
  every Kafka tool prints and what users paste;
* arrays are tuples, so records are hashable and really immutable;
* every record carries its ``Source`` (partition, offset, timestamp_ms of the log record).

Attribute names are Pythonic snake_case; Kafka's spellings live in the schema tables and in the
Kafka-shaped JSON (`decoders.kafka_json`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, Generic, TypeVar

TopicId = str  # Kafka's base64 rendering of a topic UUID
UnknownTags = tuple[tuple[int, bytes], ...]  # (tag, raw field bytes) of tagged fields we do not know


@dataclass(frozen=True, slots=True)
class Source:
    """Where a record came from: its `__consumer_offsets` partition, log offset and record timestamp."""

    partition: int
    offset: int
    timestamp_ms: int


NO_SOURCE: Final = Source(partition=-1, offset=-1, timestamp_ms=-1)  # bytes not read from a log


KeyT = TypeVar("KeyT")
ValueT = TypeVar("ValueT")


@dataclass(frozen=True, slots=True)
class Record(Generic[KeyT, ValueT]):
    """One decoded `__consumer_offsets` record.  ``value is None`` is a tombstone.

    ``layout`` names the candidate byte layout that decoded the value when the value family has
    several (share-group 3.9/4.0/4.1 layouts, KIP-848 3.7 early access); ``ambiguous_layout`` is
    True when more than one candidate consumed the bytes exactly and the newest was chosen.
    """

    source: Source
    record_type: int
    key: KeyT
    value_version: int | None
    value: ValueT | None
    layout: str | None = None
    ambiguous_layout: bool = False

    @property
    def is_tombstone(self) -> bool:
        return self.value is None


@dataclass(frozen=True, slots=True)
class UnknownRecord:
    """A record type K this decoder does not know (dead types 18, future types).  Not an error:
    Kafka 4.1+ itself skips unknown types; we keep the bytes and let the caller count it."""

    source: Source
    record_type: int
    key_bytes: bytes
    value_bytes: bytes | None


class ErrorKind(StrEnum):
    """What is wrong with undecodable bytes, as a small closed set: the metric label (the free-text
    ``reason`` carries the details -- byte counts, the value read -- for humans)."""

    #: the bytes end inside a field (also: a key or value shorter than its int16 prefix)
    TRUNCATED = "truncated"
    #: a value the format forbids: negative length, null where not nullable, over-long varint,
    #: invalid UTF-8, tagged fields out of order, a null key
    MALFORMED = "malformed"
    #: bytes left after the last field (real brokers never write any; spec "Strictness")
    TRAILING_BYTES = "trailing_bytes"
    #: a value version this decoder does not know for a known record type
    UNKNOWN_VERSION = "unknown_version"
    #: a version written with several layouts (KIP-932 share records) and no known one fits
    NO_LAYOUT = "no_layout"
    #: a decoder bug, reported as data instead of stopping the stream
    INTERNAL = "internal"


@dataclass(frozen=True, slots=True)
class DecodeError:
    """A record (or an embedded consumer-protocol blob) that could not be decoded.

    part     -- which bytes: "key", "value", or for embedded blobs "subscription" / "assignment".
    field    -- path of the field being read, in Kafka's spelling, e.g. "members[1].clientHost";
                "type" / "version" for the int16 prefixes.
    position -- byte offset (within the bytes named by ``part``) where that field starts.
    kind     -- the class of the problem (`ErrorKind`): what metrics count by.
    reason   -- the problem in words, for humans ("truncated: string of 9 bytes, 2 left").
    key      -- the decoded key when only the value failed, so errors can be attributed to a group.
    """

    source: Source
    record_type: int | None
    version: int | None
    part: str
    field: str
    position: int
    kind: ErrorKind
    reason: str
    key: Any = None
    key_bytes: bytes = b""
    value_bytes: bytes | None = None


DecodeResult = Record[Any, Any] | UnknownRecord | DecodeError


# ============================================================================================
# Keys (always classic encoding)


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    """K=0 (legacy, 0.8.2) and K=1."""

    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    """K=2 and every K>=3 keyed by the group alone."""

    group_id: str


@dataclass(frozen=True, slots=True)
class MemberKey:
    """K=5, 7, 8, 10, 13, 14, 19, 21, 22: keyed by group and member."""

    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class RegularExpressionKey:
    """K=16: keyed by group and the subscribed regular expression."""

    group_id: str
    regular_expression: str


# ============================================================================================
# K=0/1 offset commits


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int | None = None  # V3+; -1 -> None
    metadata: str | None = None  # "" -> None (a null from the client is stored as "")
    commit_timestamp_ms: int = 0
    expire_timestamp_ms: int | None = None  # V1 only; -1 -> None
    topic_id: TopicId | None = None  # V4 tag 0 (Kafka 4.1+); zero UUID -> None
    unknown_tags: UnknownTags = ()


# ============================================================================================
# Embedded consumer protocol (GroupMetadataValue.members[].subscription / .assignment)


@dataclass(frozen=True, slots=True)
class ConsumerTopicPartitions:
    topic: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ConsumerSubscription:
    """ConsumerProtocolSubscription v0-v3 (versions above 3 are read as 3, KIP-429/881 semantics)."""

    version: int
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[ConsumerTopicPartitions, ...] | None = None  # v1+
    generation_id: int | None = None  # v2+; -1 -> None
    rack_id: str | None = None  # v3+


@dataclass(frozen=True, slots=True)
class ConsumerAssignment:
    """ConsumerProtocolAssignment v0-v3.  ``version`` is None for a zero-length assignment (the
    coordinator stores one for members the leader left out of SyncGroup)."""

    version: int | None
    assigned_partitions: tuple[ConsumerTopicPartitions, ...] = ()
    user_data: bytes | None = None


# ============================================================================================
# K=2 classic group metadata


@dataclass(frozen=True, slots=True)
class GroupMember:
    member_id: str
    group_instance_id: str | None = None  # V3+ (KIP-345)
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int | None = None  # V1+; absent in V0 (Kafka then uses the session timeout)
    session_timeout_ms: int = 0
    subscription: bytes = b""
    assignment: bytes = b""
    # Filled only when the group's protocolType is "consumer"; raw bytes above are always kept.
    consumer_subscription: ConsumerSubscription | None = None
    consumer_assignment: ConsumerAssignment | None = None
    subscription_error: DecodeError | None = None
    assignment_error: DecodeError | None = None
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str | None  # "" -> None ("no protocol type": simple / offset-only group)
    generation: int
    protocol: str | None = None
    leader: str | None = None
    current_state_timestamp_ms: int | None = None  # V2+; -1 -> None
    members: tuple[GroupMember, ...] = ()
    unknown_tags: UnknownTags = ()


# ============================================================================================
# KIP-848 consumer groups (K=3..8, 16)


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataValue:
    """K=3."""

    epoch: int
    metadata_hash: int | None = None  # tag 0, Kafka 4.1+ (KIP-1101); 0 -> None
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class PartitionRacks:
    partition: int
    racks: tuple[str, ...]
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: TopicId | None
    topic_name: str
    num_partitions: int
    partition_metadata: tuple[PartitionRacks, ...] = ()
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataValue:
    """K=4 (written up to 4.0; 4.1+ writes only tombstones)."""

    topics: tuple[TopicMetadata, ...]
    epoch: int | None = None  # 3.7 early-access layout only
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class ClassicProtocol:
    name: str
    metadata: bytes
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    session_timeout_ms: int
    supported_protocols: tuple[ClassicProtocol, ...] = ()
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class EarlyAccessAssignor:
    """3.7 early-access K=5 ``Assignors`` element."""

    name: str
    minimum_version: int
    maximum_version: int
    reason: int
    version: int
    metadata: bytes
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataValue:
    """K=5."""

    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int | None = None  # -1 -> None
    server_assignor: str | None = None
    classic_member_metadata: ClassicMemberMetadata | None = None  # tag 0
    assignors: tuple[EarlyAccessAssignor, ...] | None = None  # 3.7 early-access layout only
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    """K=6."""

    assignment_epoch: int
    assignment_timestamp_ms: int | None = None  # tag 0, Kafka 4.3+ (KIP-1263); 0 -> None
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class TopicIdPartitions:
    """Topic id + partitions; used by K=7, 8, 13, 14."""

    topic_id: TopicId | None
    partitions: tuple[int, ...]
    assignment_epochs: tuple[int, ...] | None = None  # K=8 tag 0, Kafka 4.3+ (KIP-1251)
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberValue:
    """K=7."""

    topic_partitions: tuple[TopicIdPartitions, ...]
    error: int | None = None  # 3.7 early-access layout only
    metadata_version: int | None = None  # 3.7 early-access layout only
    metadata_bytes: bytes | None = None  # 3.7 early-access layout only
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    """K=8.  ``state``: 0 STABLE, 1 UNREVOKED_PARTITIONS, 2 UNRELEASED_PARTITIONS, 127 UNKNOWN."""

    member_epoch: int
    previous_member_epoch: int
    assigned_partitions: tuple[TopicIdPartitions, ...]
    partitions_pending_revocation: tuple[TopicIdPartitions, ...]
    state: int | None = None  # None only in the 3.7 early-access layout (which has no State field)
    target_member_epoch: int | None = None  # 3.7 early-access layout only
    partitions_pending_assignment: tuple[TopicIdPartitions, ...] | None = None  # 3.7 EA only
    error: int | None = None  # 3.7 EA only
    metadata_version: int | None = None  # 3.7 EA only
    metadata_bytes: bytes | None = None  # 3.7 EA only
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionValue:
    """K=16: topics a broker-side regex resolved to (Kafka 4.0+)."""

    topics: tuple[str, ...]
    version: int
    timestamp_ms: int
    unknown_tags: UnknownTags = ()


# ============================================================================================
# KIP-932 share groups (K=9..15)


@dataclass(frozen=True, slots=True)
class TopicPartitionsInfo:
    topic_id: TopicId | None
    topic_name: str
    partitions: tuple[int, ...]
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class TopicInfo:
    topic_id: TopicId | None
    topic_name: str
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class ShareGroupPartitionMetadataValue:
    """K=9 (3.9 and 4.0 only).  4.0 layout: ``topics``; 3.9 layout: ``initialized_topics`` +
    ``deleting_topics``.  Fields of the other layout are None."""

    topics: tuple[TopicMetadata, ...] | None = None
    initialized_topics: tuple[TopicPartitionsInfo, ...] | None = None
    deleting_topics: tuple[TopicInfo, ...] | None = None
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataValue:
    """K=10."""

    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataValue:
    """K=11.  ``metadata_hash`` exists only in the 4.1+ layout (None when read with the 4.0 layout)."""

    epoch: int
    metadata_hash: int | None = None
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMetadataValue:
    """K=12."""

    assignment_epoch: int
    assignment_timestamp_ms: int | None = None  # tag 0, 4.3+; 0 -> None
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMemberValue:
    """K=13."""

    topic_partitions: tuple[TopicIdPartitions, ...]
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentValue:
    """K=14."""

    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: tuple[TopicIdPartitions, ...]
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class ShareGroupStatePartitionMetadataValue:
    """K=15.  ``initializing_topics`` exists only in the 4.1+ layout (None with the 4.0 layout)."""

    initialized_topics: tuple[TopicPartitionsInfo, ...]
    deleting_topics: tuple[TopicInfo, ...]
    initializing_topics: tuple[TopicPartitionsInfo, ...] | None = None
    unknown_tags: UnknownTags = ()


# ============================================================================================
# KIP-1071 streams groups (K=17, 19..23)


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: str
    value: str
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class StreamsGroupMetadataValue:
    """K=17."""

    epoch: int
    metadata_hash: int
    validated_topology_epoch: int | None = None  # tag 0 (4.2+); -1 -> None
    last_assignment_configs: tuple[KeyValue, ...] | None = None  # tag 1 (4.2+)
    stored_description_topology_epoch: int | None = None  # tag 2 (4.4+); -1 -> None
    failed_description_topology_epoch: int | None = None  # tag 3 (4.4+); -1 -> None
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class StreamsGroupMemberMetadataValue:
    """K=19."""

    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int | None
    topology_epoch: int
    process_id: str
    user_endpoint: Endpoint | None
    client_tags: tuple[KeyValue, ...]
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class StreamsGroupTargetAssignmentMetadataValue:
    """K=20."""

    assignment_epoch: int
    assignment_timestamp_ms: int | None = None  # tag 0, 4.3+; 0 -> None
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class TaskIds:
    subtopology_id: str
    partitions: tuple[int, ...]
    assignment_epochs: tuple[int, ...] | None = None  # K=22 tag 0 (4.2+)
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class StreamsGroupTargetAssignmentMemberValue:
    """K=21."""

    active_tasks: tuple[TaskIds, ...]
    standby_tasks: tuple[TaskIds, ...]
    warmup_tasks: tuple[TaskIds, ...]
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class StreamsGroupCurrentMemberAssignmentValue:
    """K=22.  ``state``: 1 STABLE, 2 UNREVOKED_TASKS, 3 UNRELEASED_TASKS, 127 UNKNOWN (differs
    from the consumer-group enum)."""

    member_epoch: int
    previous_member_epoch: int
    state: int
    active_tasks: tuple[TaskIds, ...]
    standby_tasks: tuple[TaskIds, ...]
    warmup_tasks: tuple[TaskIds, ...]
    active_tasks_pending_revocation: tuple[TaskIds, ...]
    standby_tasks_pending_revocation: tuple[TaskIds, ...]
    warmup_tasks_pending_revocation: tuple[TaskIds, ...]
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class StreamsTopicInfo:
    name: str
    partitions: int
    replication_factor: int
    topic_configs: tuple[KeyValue, ...]
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class CopartitionGroup:
    """Indexes into the enclosing subtopology's topic lists."""

    source_topics: tuple[int, ...]
    source_topic_regex: tuple[int, ...]
    repartition_source_topics: tuple[int, ...]
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...]
    source_topic_regex: tuple[str, ...]
    state_changelog_topics: tuple[StreamsTopicInfo, ...]
    repartition_sink_topics: tuple[str, ...]
    repartition_source_topics: tuple[StreamsTopicInfo, ...]
    copartition_groups: tuple[CopartitionGroup, ...]
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class StreamsGroupTopologyValue:
    """K=23."""

    epoch: int
    subtopologies: tuple[Subtopology, ...]
    unknown_tags: UnknownTags = ()


# ============================================================================================
# `__share_group_state` (KIP-932 share coordinator): K=0 ShareSnapshot, K=1 ShareUpdate


@dataclass(frozen=True, slots=True)
class SharePartitionKey:
    """The key of both share-state records: one share-partition (group, topic id, partition)."""

    group_id: str
    topic_id: TopicId | None
    partition: int


@dataclass(frozen=True, slots=True)
class ShareStateBatch:
    """A run of offsets with one delivery state: 0 Available, 2 Acknowledged, 4 Archived (1
    Acquired and 3 Archiving are never persisted); ``delivery_count`` = delivery attempts so far."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class ShareSnapshotValue:
    """K=0: the whole state of a share-partition.  ``start_offset`` None: not initialised yet
    (-1); ``leader_epoch`` -1 -> None; ``delivery_complete_count`` (tag 0, 4.2+, KIP-1226) -1 or
    absent -> None.  The 4.0 layout has no create/write timestamps (None)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int | None
    start_offset: int | None
    state_batches: tuple[ShareStateBatch, ...]
    delivery_complete_count: int | None = None
    create_timestamp_ms: int | None = None
    write_timestamp_ms: int | None = None
    unknown_tags: UnknownTags = ()


@dataclass(frozen=True, slots=True)
class ShareUpdateValue:
    """K=1: a change on top of the last snapshot.  ``start_offset`` None (-1): unchanged;
    ``leader_epoch`` None (-1): unchanged; ``delivery_complete_count`` as in `ShareSnapshotValue`."""

    snapshot_epoch: int
    leader_epoch: int | None
    start_offset: int | None
    state_batches: tuple[ShareStateBatch, ...]
    delivery_complete_count: int | None = None
    unknown_tags: UnknownTags = ()


# Handy aliases for the state layer's dispatch tables.
OffsetCommitRecord = Record[OffsetCommitKey, OffsetCommitValue]
GroupMetadataRecord = Record[GroupKey, GroupMetadataValue]
