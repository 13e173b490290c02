"""Our schema tables: every key and value layout of `__consumer_offsets`, Kafka 0.8.2 -> 4.x, and of
`__share_group_state` (the KIP-932 share coordinator's topic), as data.

Written from the facts in ../shared/spec/consumer-offsets-format.md (section numbers below), not
copied from Kafka.  Field names are Kafka's (they appear in the Kafka-shaped JSON); ``attr`` /
``none_if`` say how each becomes an attribute of the typed record.  Adding a Kafka version is a
table edit: a new ``Versions`` bound, a new field, or a new ``Layout``.

Ordering rule for alternative layouts of one value version: newest (preferred) first.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from decoders import records as r
from decoders.schema import (
    BYTES,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    UINT16,
    UUID,
    ArrayOf,
    F,
    Layout,
    RecordType,
    Struct,
    ValueFamily,
    between,
    only,
    since,
)

# ============================================================================================
# Keys (spec §1.3, §2.1, §3.1).  Keys are always classic; K=0..2 spell the group "group",
# K>=3 spell it "GroupId" (matters for JSON only).

OFFSET_COMMIT_KEY: Final = Struct(
    "OffsetCommitKey",
    (F("group", STRING, attr="group_id"), F("topic", STRING), F("partition", INT32)),
    r.OffsetCommitKey,
)
# K=0: 0.8.2's key.  Identical layout; a separate node so K=0 keeps its own identity.
LEGACY_OFFSET_COMMIT_KEY: Final = Struct("LegacyOffsetCommitKey", OFFSET_COMMIT_KEY.fields, r.OffsetCommitKey)
GROUP_METADATA_KEY: Final = Struct("GroupMetadataKey", (F("group", STRING, attr="group_id"),), r.GroupKey)


def _group_key(name: str) -> Struct:
    return Struct(name, (F("GroupId", STRING),), r.GroupKey)


def _member_key(name: str) -> Struct:
    return Struct(name, (F("GroupId", STRING), F("MemberId", STRING)), r.MemberKey)


# ============================================================================================
# K=0/1 OffsetCommitValue (spec §2.2).  V0-V3 classic, V4 flexible (KIP-915, Kafka 3.5+);
# V4 tag 0 topicId since Kafka 4.1 (KAFKA-19141).  leaderEpoch is inserted *before* metadata
# from V3 (KIP-320, Kafka 2.1); expireTimestamp exists in V1 only.

OFFSET_COMMIT_VALUE: Final = Struct(
    "OffsetCommitValue",
    (
        F("offset", INT64),
        F("leaderEpoch", INT32, since(3), default=-1, none_if=(-1,)),
        F("metadata", STRING, none_if=("",)),
        F("commitTimestamp", INT64, attr="commit_timestamp_ms"),
        F("expireTimestamp", INT64, only(1), default=-1, none_if=(-1,), attr="expire_timestamp_ms"),
        F("topicId", UUID, since(4), tag=0),
    ),
    r.OffsetCommitValue,
)

OFFSET_COMMIT_FAMILY: Final = ValueFamily(
    "OffsetCommitValue",
    versions=between(0, 4),
    flexible=since(4),
    layouts=(Layout("0.9+", OFFSET_COMMIT_VALUE),),
    cls=r.OffsetCommitValue,
)

# ============================================================================================
# K=2 GroupMetadataValue (spec §3.2).  V4 flexible (defined since 3.5, written by no release).

GROUP_MEMBER: Final = Struct(
    "MemberMetadata",
    (
        F("memberId", STRING),
        # KIP-345 (2.3): between memberId and clientId.
        F("groupInstanceId", STRING, since(3), nullable=True),
        F("clientId", STRING),
        F("clientHost", STRING),
        F("rebalanceTimeout", INT32, since(1), attr="rebalance_timeout_ms"),
        F("sessionTimeout", INT32, attr="session_timeout_ms"),
        F("subscription", BYTES),
        F("assignment", BYTES),
    ),
    r.GroupMember,
)

GROUP_METADATA_VALUE: Final = Struct(
    "GroupMetadataValue",
    (
        F("protocolType", STRING, none_if=("",)),
        F("generation", INT32),
        # 0.9/0.10.0 declared these non-nullable; 0.10.1 made them nullable with the same bytes.
        F("protocol", STRING, nullable=True),
        F("leader", STRING, nullable=True),
        F(
            "currentStateTimestamp",
            INT64,
            since(2),
            default=-1,
            none_if=(-1,),
            attr="current_state_timestamp_ms",
        ),
        F("members", ArrayOf(GROUP_MEMBER)),
    ),
    r.GroupMetadataValue,
)

GROUP_METADATA_FAMILY: Final = ValueFamily(
    "GroupMetadataValue",
    versions=between(0, 4),
    flexible=since(4),
    layouts=(Layout("0.9+", GROUP_METADATA_VALUE),),
    cls=r.GroupMetadataValue,
)

# ============================================================================================
# Embedded consumer protocol (spec §4.2, §4.3): always classic.

CONSUMER_TOPIC_PARTITIONS: Final = Struct(
    "TopicPartition",
    (F("topic", STRING), F("partitions", ArrayOf(INT32))),
    r.ConsumerTopicPartitions,
)

CONSUMER_SUBSCRIPTION: Final = Struct(
    "ConsumerProtocolSubscription",
    (
        F("topics", ArrayOf(STRING)),
        F("userData", BYTES, nullable=True),
        F("ownedPartitions", ArrayOf(CONSUMER_TOPIC_PARTITIONS), since(1)),  # KIP-429 (2.4)
        F("generationId", INT32, since(2), default=-1, none_if=(-1,)),  # KAFKA-13715 (3.4)
        F("rackId", STRING, since(3), nullable=True),  # KIP-881 (3.4)
    ),
    r.ConsumerSubscription,
)

CONSUMER_ASSIGNMENT: Final = Struct(
    "ConsumerProtocolAssignment",
    (
        F("assignedPartitions", ArrayOf(CONSUMER_TOPIC_PARTITIONS)),
        F("userData", BYTES, nullable=True),
    ),
    r.ConsumerAssignment,
)

CONSUMER_PROTOCOL_MAX_VERSION: Final = 3  # higher versions are read as 3 (new fields only append)

# ============================================================================================
# K>=3 values (spec §1.6).  All V0 and flexible.

_V0 = only(0)


def _family(name: str, cls: type, *layouts: Layout) -> ValueFamily:
    return ValueFamily(name, versions=_V0, flexible=since(0), layouts=layouts, cls=cls)


def _struct(name: str, cls: type, *fields: object) -> Struct:
    return Struct(name, tuple(fields), cls)  # type: ignore[arg-type]


# K=3 -- tag 0 MetadataHash since 4.1 (KIP-1101).
CONSUMER_GROUP_METADATA_VALUE: Final = _struct(
    "ConsumerGroupMetadataValue",
    r.ConsumerGroupMetadataValue,
    F("Epoch", INT32),
    F("MetadataHash", INT64, tag=0, default=0, none_if=(0,)),
)

# K=4 / K=9 (4.0) topic metadata.
PARTITION_RACKS: Final = _struct(
    "PartitionMetadata", r.PartitionRacks, F("Partition", INT32), F("Racks", ArrayOf(STRING))
)
TOPIC_METADATA: Final = _struct(
    "TopicMetadata",
    r.TopicMetadata,
    F("TopicId", UUID),
    F("TopicName", STRING),
    F("NumPartitions", INT32),
    F("PartitionMetadata", ArrayOf(PARTITION_RACKS)),
)
CONSUMER_GROUP_PARTITION_METADATA_VALUE: Final = _struct(
    "ConsumerGroupPartitionMetadataValue",
    r.ConsumerGroupPartitionMetadataValue,
    F("Topics", ArrayOf(TOPIC_METADATA)),
)
# 3.7 early access: a leading Epoch (spec §1.6 "Early-access layouts").
CONSUMER_GROUP_PARTITION_METADATA_VALUE_EA: Final = _struct(
    "ConsumerGroupPartitionMetadataValue",
    r.ConsumerGroupPartitionMetadataValue,
    F("Epoch", INT32),
    F("Topics", ArrayOf(TOPIC_METADATA)),
)

# K=5
CLASSIC_PROTOCOL: Final = _struct(
    "ClassicProtocol", r.ClassicProtocol, F("Name", STRING), F("Metadata", BYTES)
)
CLASSIC_MEMBER_METADATA: Final = _struct(
    "ClassicMemberMetadata",
    r.ClassicMemberMetadata,
    F("SessionTimeoutMs", INT32),
    F("SupportedProtocols", ArrayOf(CLASSIC_PROTOCOL)),
)
_K5_COMMON: Final = (
    F("InstanceId", STRING, nullable=True),
    F("RackId", STRING, nullable=True),
    F("ClientId", STRING),
    F("ClientHost", STRING),
    F("SubscribedTopicNames", ArrayOf(STRING)),
    F("SubscribedTopicRegex", STRING, nullable=True),
    F("RebalanceTimeoutMs", INT32, default=-1, none_if=(-1,)),
    F("ServerAssignor", STRING, nullable=True),
)
CONSUMER_GROUP_MEMBER_METADATA_VALUE: Final = _struct(
    "ConsumerGroupMemberMetadataValue",
    r.ConsumerGroupMemberMetadataValue,
    *_K5_COMMON,
    # Members using the classic protocol inside a consumer group (online migration, 3.8+).
    F("ClassicMemberMetadata", CLASSIC_MEMBER_METADATA, nullable=True, tag=0),
)
EA_ASSIGNOR: Final = _struct(
    "Assignor",
    r.EarlyAccessAssignor,
    F("Name", STRING),
    F("MinimumVersion", INT16),
    F("MaximumVersion", INT16),
    F("Reason", INT8),
    F("Version", INT16),
    F("Metadata", BYTES),
)
CONSUMER_GROUP_MEMBER_METADATA_VALUE_EA: Final = _struct(
    "ConsumerGroupMemberMetadataValue",
    r.ConsumerGroupMemberMetadataValue,
    *_K5_COMMON,
    F("Assignors", ArrayOf(EA_ASSIGNOR)),
)

# K=6 / K=12 / K=20 -- tag 0 AssignmentTimestamp since 4.3 (KIP-1263).
_ASSIGNMENT_TIMESTAMP = F(
    "AssignmentTimestamp", INT64, tag=0, default=0, none_if=(0,), attr="assignment_timestamp_ms"
)
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE: Final = _struct(
    "ConsumerGroupTargetAssignmentMetadataValue",
    r.ConsumerGroupTargetAssignmentMetadataValue,
    F("AssignmentEpoch", INT32),
    _ASSIGNMENT_TIMESTAMP,
)

# K=7 / K=13 / K=14 topic partitions (no tagged fields).
TOPIC_ID_PARTITIONS: Final = _struct(
    "TopicPartition", r.TopicIdPartitions, F("TopicId", UUID), F("Partitions", ArrayOf(INT32))
)
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE: Final = _struct(
    "ConsumerGroupTargetAssignmentMemberValue",
    r.ConsumerGroupTargetAssignmentMemberValue,
    F("TopicPartitions", ArrayOf(TOPIC_ID_PARTITIONS)),
)
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE_EA: Final = _struct(
    "ConsumerGroupTargetAssignmentMemberValue",
    r.ConsumerGroupTargetAssignmentMemberValue,
    F("Error", INT8),
    F("TopicPartitions", ArrayOf(TOPIC_ID_PARTITIONS)),
    F("MetadataVersion", INT16),
    F("MetadataBytes", BYTES),
)

# K=8 -- TopicPartitions gains tag 0 AssignmentEpochs in 4.3 (KIP-1251).
K8_TOPIC_PARTITIONS: Final = _struct(
    "TopicPartitions",
    r.TopicIdPartitions,
    F("TopicId", UUID),
    F("Partitions", ArrayOf(INT32)),
    F("AssignmentEpochs", ArrayOf(INT32), nullable=True, tag=0),
)
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE: Final = _struct(
    "ConsumerGroupCurrentMemberAssignmentValue",
    r.ConsumerGroupCurrentMemberAssignmentValue,
    F("MemberEpoch", INT32),
    F("PreviousMemberEpoch", INT32),
    F("State", INT8),
    F("AssignedPartitions", ArrayOf(K8_TOPIC_PARTITIONS)),
    F("PartitionsPendingRevocation", ArrayOf(K8_TOPIC_PARTITIONS)),
)
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_EA: Final = _struct(
    "ConsumerGroupCurrentMemberAssignmentValue",
    r.ConsumerGroupCurrentMemberAssignmentValue,
    F("MemberEpoch", INT32),
    F("PreviousMemberEpoch", INT32),
    F("TargetMemberEpoch", INT32),
    F("AssignedPartitions", ArrayOf(TOPIC_ID_PARTITIONS)),
    F("PartitionsPendingRevocation", ArrayOf(TOPIC_ID_PARTITIONS)),
    F("PartitionsPendingAssignment", ArrayOf(TOPIC_ID_PARTITIONS)),
    F("Error", INT8),
    F("MetadataVersion", INT16),
    F("MetadataBytes", BYTES),
)

# K=16
CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE: Final = _struct(
    "ConsumerGroupRegularExpressionValue",
    r.ConsumerGroupRegularExpressionValue,
    F("Topics", ArrayOf(STRING)),
    F("Version", INT64),
    F("Timestamp", INT64, attr="timestamp_ms"),
)

# --- share groups (KIP-932) -----------------------------------------------------------------
TOPIC_PARTITIONS_INFO: Final = _struct(
    "TopicPartitionsInfo",
    r.TopicPartitionsInfo,
    F("TopicId", UUID),
    F("TopicName", STRING),
    F("Partitions", ArrayOf(INT32)),
)
TOPIC_INFO: Final = _struct("TopicInfo", r.TopicInfo, F("TopicId", UUID), F("TopicName", STRING))

# K=9: 4.0 vs 3.9 (removed in 4.1, KAFKA-17747).
SHARE_GROUP_PARTITION_METADATA_VALUE_40: Final = _struct(
    "ShareGroupPartitionMetadataValue",
    r.ShareGroupPartitionMetadataValue,
    F("Topics", ArrayOf(TOPIC_METADATA)),
)
SHARE_GROUP_PARTITION_METADATA_VALUE_39: Final = _struct(
    "ShareGroupPartitionMetadataValue",
    r.ShareGroupPartitionMetadataValue,
    F("InitializedTopics", ArrayOf(TOPIC_PARTITIONS_INFO)),
    F("DeletingTopics", ArrayOf(TOPIC_INFO)),
)

# K=10
SHARE_GROUP_MEMBER_METADATA_VALUE: Final = _struct(
    "ShareGroupMemberMetadataValue",
    r.ShareGroupMemberMetadataValue,
    F("RackId", STRING, nullable=True),
    F("ClientId", STRING),
    F("ClientHost", STRING),
    F("SubscribedTopicNames", ArrayOf(STRING)),
)

# K=11: 4.1 added MetadataHash as a *regular* field to V0 -- incompatible with 3.9/4.0.
SHARE_GROUP_METADATA_VALUE_41: Final = _struct(
    "ShareGroupMetadataValue", r.ShareGroupMetadataValue, F("Epoch", INT32), F("MetadataHash", INT64)
)
SHARE_GROUP_METADATA_VALUE_40: Final = _struct(
    "ShareGroupMetadataValue", r.ShareGroupMetadataValue, F("Epoch", INT32)
)

# K=12
SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE: Final = _struct(
    "ShareGroupTargetAssignmentMetadataValue",
    r.ShareGroupTargetAssignmentMetadataValue,
    F("AssignmentEpoch", INT32),
    _ASSIGNMENT_TIMESTAMP,
)
# K=13
SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE: Final = _struct(
    "ShareGroupTargetAssignmentMemberValue",
    r.ShareGroupTargetAssignmentMemberValue,
    F("TopicPartitions", ArrayOf(TOPIC_ID_PARTITIONS)),
)
# K=14
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE: Final = _struct(
    "ShareGroupCurrentMemberAssignmentValue",
    r.ShareGroupCurrentMemberAssignmentValue,
    F("MemberEpoch", INT32),
    F("PreviousMemberEpoch", INT32),
    F("State", INT8),
    F("AssignedPartitions", ArrayOf(TOPIC_ID_PARTITIONS)),
)
# K=15: 4.1 inserted InitializingTopics as the new *first* field of V0 -- incompatible with 4.0.
SHARE_GROUP_STATE_PARTITION_METADATA_VALUE_41: Final = _struct(
    "ShareGroupStatePartitionMetadataValue",
    r.ShareGroupStatePartitionMetadataValue,
    F("InitializingTopics", ArrayOf(TOPIC_PARTITIONS_INFO)),
    F("InitializedTopics", ArrayOf(TOPIC_PARTITIONS_INFO)),
    F("DeletingTopics", ArrayOf(TOPIC_INFO)),
)
SHARE_GROUP_STATE_PARTITION_METADATA_VALUE_40: Final = _struct(
    "ShareGroupStatePartitionMetadataValue",
    r.ShareGroupStatePartitionMetadataValue,
    F("InitializedTopics", ArrayOf(TOPIC_PARTITIONS_INFO)),
    F("DeletingTopics", ArrayOf(TOPIC_INFO)),
)

# --- streams groups (KIP-1071) ---------------------------------------------------------------
KEY_VALUE: Final = _struct("KeyValue", r.KeyValue, F("Key", STRING), F("Value", STRING))

# K=17
STREAMS_GROUP_METADATA_VALUE: Final = _struct(
    "StreamsGroupMetadataValue",
    r.StreamsGroupMetadataValue,
    F("Epoch", INT32),
    F("MetadataHash", INT64),
    F("ValidatedTopologyEpoch", INT32, tag=0, default=-1, none_if=(-1,)),  # 4.2+
    F("LastAssignmentConfigs", ArrayOf(KEY_VALUE), nullable=True, tag=1),  # 4.2+
    F("StoredDescriptionTopologyEpoch", INT32, tag=2, default=-1, none_if=(-1,)),  # 4.4+
    F("FailedDescriptionTopologyEpoch", INT32, tag=3, default=-1, none_if=(-1,)),  # 4.4+
)

# K=19 -- UserEndpoint is a non-tagged nullable struct: int8 marker -1 (null) / 1 (present).
ENDPOINT: Final = _struct("Endpoint", r.Endpoint, F("Host", STRING), F("Port", UINT16))
STREAMS_GROUP_MEMBER_METADATA_VALUE: Final = _struct(
    "StreamsGroupMemberMetadataValue",
    r.StreamsGroupMemberMetadataValue,
    F("InstanceId", STRING, nullable=True),
    F("RackId", STRING, nullable=True),
    F("ClientId", STRING),
    F("ClientHost", STRING),
    F("RebalanceTimeoutMs", INT32, default=-1, none_if=(-1,)),
    F("TopologyEpoch", INT32),
    F("ProcessId", STRING),
    F("UserEndpoint", ENDPOINT, nullable=True),
    F("ClientTags", ArrayOf(KEY_VALUE)),
)

# K=20
STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE: Final = _struct(
    "StreamsGroupTargetAssignmentMetadataValue",
    r.StreamsGroupTargetAssignmentMetadataValue,
    F("AssignmentEpoch", INT32),
    _ASSIGNMENT_TIMESTAMP,
)

# K=21
TASK_IDS: Final = _struct("TaskIds", r.TaskIds, F("SubtopologyId", STRING), F("Partitions", ArrayOf(INT32)))
STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE: Final = _struct(
    "StreamsGroupTargetAssignmentMemberValue",
    r.StreamsGroupTargetAssignmentMemberValue,
    F("ActiveTasks", ArrayOf(TASK_IDS)),
    F("StandbyTasks", ArrayOf(TASK_IDS)),
    F("WarmupTasks", ArrayOf(TASK_IDS)),
)

# K=22 -- TaskIds gains tag 0 AssignmentEpochs in 4.2.
K22_TASK_IDS: Final = _struct(
    "TaskIds",
    r.TaskIds,
    F("SubtopologyId", STRING),
    F("Partitions", ArrayOf(INT32)),
    F("AssignmentEpochs", ArrayOf(INT32), nullable=True, tag=0),
)
STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE: Final = _struct(
    "StreamsGroupCurrentMemberAssignmentValue",
    r.StreamsGroupCurrentMemberAssignmentValue,
    F("MemberEpoch", INT32),
    F("PreviousMemberEpoch", INT32),
    F("State", INT8),
    F("ActiveTasks", ArrayOf(K22_TASK_IDS)),
    F("StandbyTasks", ArrayOf(K22_TASK_IDS)),
    F("WarmupTasks", ArrayOf(K22_TASK_IDS)),
    F("ActiveTasksPendingRevocation", ArrayOf(K22_TASK_IDS)),
    F("StandbyTasksPendingRevocation", ArrayOf(K22_TASK_IDS)),
    F("WarmupTasksPendingRevocation", ArrayOf(K22_TASK_IDS)),
)

# K=23
TOPIC_CONFIG: Final = _struct("TopicConfig", r.KeyValue, F("key", STRING), F("value", STRING))
STREAMS_TOPIC_INFO: Final = _struct(
    "TopicInfo",
    r.StreamsTopicInfo,
    F("Name", STRING),
    F("Partitions", INT32),
    F("ReplicationFactor", INT16),
    F("TopicConfigs", ArrayOf(TOPIC_CONFIG)),
)
COPARTITION_GROUP: Final = _struct(
    "CopartitionGroup",
    r.CopartitionGroup,
    F("SourceTopics", ArrayOf(INT16)),
    F("SourceTopicRegex", ArrayOf(INT16)),
    F("RepartitionSourceTopics", ArrayOf(INT16)),
)
SUBTOPOLOGY: Final = _struct(
    "Subtopology",
    r.Subtopology,
    F("SubtopologyId", STRING),
    F("SourceTopics", ArrayOf(STRING)),
    F("SourceTopicRegex", ArrayOf(STRING)),
    F("StateChangelogTopics", ArrayOf(STREAMS_TOPIC_INFO)),
    F("RepartitionSinkTopics", ArrayOf(STRING)),
    F("RepartitionSourceTopics", ArrayOf(STREAMS_TOPIC_INFO)),
    F("CopartitionGroups", ArrayOf(COPARTITION_GROUP)),
)
STREAMS_GROUP_TOPOLOGY_VALUE: Final = _struct(
    "StreamsGroupTopologyValue",
    r.StreamsGroupTopologyValue,
    F("Epoch", INT32),
    F("Subtopologies", ArrayOf(SUBTOPOLOGY)),
)

# ============================================================================================
# The registry: K -> (key struct, value family).  Spec §1.3.  K=18 (trunk-only, in no release)
# is deliberately absent and therefore decodes as UnknownRecord.

_EA = "3.7-early-access"
_MODERN = "3.8+"


def _rt(k: int, name: str, key: Struct, family: ValueFamily, first: str) -> RecordType:
    return RecordType(k=k, name=name, key=key, value=family, first_written_by=first)


RECORD_TYPES: Final[Mapping[int, RecordType]] = MappingProxyType(
    {
        rt.k: rt
        for rt in (
            _rt(0, "LEGACY_OFFSET_COMMIT", LEGACY_OFFSET_COMMIT_KEY, OFFSET_COMMIT_FAMILY, "0.8.2"),
            _rt(1, "OFFSET_COMMIT", OFFSET_COMMIT_KEY, OFFSET_COMMIT_FAMILY, "0.9"),
            _rt(2, "GROUP_METADATA", GROUP_METADATA_KEY, GROUP_METADATA_FAMILY, "0.9"),
            _rt(
                3,
                "CONSUMER_GROUP_METADATA",
                _group_key("ConsumerGroupMetadataKey"),
                _family(
                    "ConsumerGroupMetadataValue",
                    r.ConsumerGroupMetadataValue,
                    Layout(_MODERN, CONSUMER_GROUP_METADATA_VALUE),
                ),
                "3.5",
            ),
            _rt(
                4,
                "CONSUMER_GROUP_PARTITION_METADATA",
                _group_key("ConsumerGroupPartitionMetadataKey"),
                _family(
                    "ConsumerGroupPartitionMetadataValue",
                    r.ConsumerGroupPartitionMetadataValue,
                    Layout(_MODERN, CONSUMER_GROUP_PARTITION_METADATA_VALUE),
                    Layout(_EA, CONSUMER_GROUP_PARTITION_METADATA_VALUE_EA),
                ),
                "3.5",
            ),
            _rt(
                5,
                "CONSUMER_GROUP_MEMBER_METADATA",
                _member_key("ConsumerGroupMemberMetadataKey"),
                _family(
                    "ConsumerGroupMemberMetadataValue",
                    r.ConsumerGroupMemberMetadataValue,
                    Layout(_MODERN, CONSUMER_GROUP_MEMBER_METADATA_VALUE),
                    Layout(_EA, CONSUMER_GROUP_MEMBER_METADATA_VALUE_EA),
                ),
                "3.5",
            ),
            _rt(
                6,
                "CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA",
                _group_key("ConsumerGroupTargetAssignmentMetadataKey"),
                _family(
                    "ConsumerGroupTargetAssignmentMetadataValue",
                    r.ConsumerGroupTargetAssignmentMetadataValue,
                    Layout(_MODERN, CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE),
                ),
                "3.5",
            ),
            _rt(
                7,
                "CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER",
                _member_key("ConsumerGroupTargetAssignmentMemberKey"),
                _family(
                    "ConsumerGroupTargetAssignmentMemberValue",
                    r.ConsumerGroupTargetAssignmentMemberValue,
                    Layout(_MODERN, CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE),
                    Layout(_EA, CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE_EA),
                ),
                "3.5",
            ),
            _rt(
                8,
                "CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT",
                _member_key("ConsumerGroupCurrentMemberAssignmentKey"),
                _family(
                    "ConsumerGroupCurrentMemberAssignmentValue",
                    r.ConsumerGroupCurrentMemberAssignmentValue,
                    Layout(_MODERN, CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE),
                    Layout(_EA, CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_EA),
                ),
                "3.5",
            ),
            _rt(
                9,
                "SHARE_GROUP_PARTITION_METADATA",
                _group_key("ShareGroupPartitionMetadataKey"),
                _family(
                    "ShareGroupPartitionMetadataValue",
                    r.ShareGroupPartitionMetadataValue,
                    Layout("4.0", SHARE_GROUP_PARTITION_METADATA_VALUE_40),
                    Layout("3.9", SHARE_GROUP_PARTITION_METADATA_VALUE_39),
                ),
                "3.9",
            ),
            _rt(
                10,
                "SHARE_GROUP_MEMBER_METADATA",
                _member_key("ShareGroupMemberMetadataKey"),
                _family(
                    "ShareGroupMemberMetadataValue",
                    r.ShareGroupMemberMetadataValue,
                    Layout("3.9+", SHARE_GROUP_MEMBER_METADATA_VALUE),
                ),
                "3.9",
            ),
            _rt(
                11,
                "SHARE_GROUP_METADATA",
                _group_key("ShareGroupMetadataKey"),
                _family(
                    "ShareGroupMetadataValue",
                    r.ShareGroupMetadataValue,
                    Layout("4.1+", SHARE_GROUP_METADATA_VALUE_41),
                    Layout("3.9-4.0", SHARE_GROUP_METADATA_VALUE_40),
                ),
                "3.9",
            ),
            _rt(
                12,
                "SHARE_GROUP_TARGET_ASSIGNMENT_METADATA",
                _group_key("ShareGroupTargetAssignmentMetadataKey"),
                _family(
                    "ShareGroupTargetAssignmentMetadataValue",
                    r.ShareGroupTargetAssignmentMetadataValue,
                    Layout("4.0+", SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE),
                ),
                "4.0",
            ),
            _rt(
                13,
                "SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER",
                _member_key("ShareGroupTargetAssignmentMemberKey"),
                _family(
                    "ShareGroupTargetAssignmentMemberValue",
                    r.ShareGroupTargetAssignmentMemberValue,
                    Layout("4.0+", SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE),
                ),
                "4.0",
            ),
            _rt(
                14,
                "SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT",
                _member_key("ShareGroupCurrentMemberAssignmentKey"),
                _family(
                    "ShareGroupCurrentMemberAssignmentValue",
                    r.ShareGroupCurrentMemberAssignmentValue,
                    Layout("4.0+", SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE),
                ),
                "4.0",
            ),
            _rt(
                15,
                "SHARE_GROUP_STATE_PARTITION_METADATA",
                _group_key("ShareGroupStatePartitionMetadataKey"),
                _family(
                    "ShareGroupStatePartitionMetadataValue",
                    r.ShareGroupStatePartitionMetadataValue,
                    Layout("4.1+", SHARE_GROUP_STATE_PARTITION_METADATA_VALUE_41),
                    Layout("4.0", SHARE_GROUP_STATE_PARTITION_METADATA_VALUE_40),
                ),
                "4.0",
            ),
            _rt(
                16,
                "CONSUMER_GROUP_REGULAR_EXPRESSION",
                Struct(
                    "ConsumerGroupRegularExpressionKey",
                    (F("GroupId", STRING), F("RegularExpression", STRING)),
                    r.RegularExpressionKey,
                ),
                _family(
                    "ConsumerGroupRegularExpressionValue",
                    r.ConsumerGroupRegularExpressionValue,
                    Layout("4.0+", CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE),
                ),
                "4.0",
            ),
            _rt(
                17,
                "STREAMS_GROUP_METADATA",
                _group_key("StreamsGroupMetadataKey"),
                _family(
                    "StreamsGroupMetadataValue",
                    r.StreamsGroupMetadataValue,
                    Layout("4.1+", STREAMS_GROUP_METADATA_VALUE),
                ),
                "4.1",
            ),
            _rt(
                19,
                "STREAMS_GROUP_MEMBER_METADATA",
                _member_key("StreamsGroupMemberMetadataKey"),
                _family(
                    "StreamsGroupMemberMetadataValue",
                    r.StreamsGroupMemberMetadataValue,
                    Layout("4.1+", STREAMS_GROUP_MEMBER_METADATA_VALUE),
                ),
                "4.1",
            ),
            _rt(
                20,
                "STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA",
                _group_key("StreamsGroupTargetAssignmentMetadataKey"),
                _family(
                    "StreamsGroupTargetAssignmentMetadataValue",
                    r.StreamsGroupTargetAssignmentMetadataValue,
                    Layout("4.1+", STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE),
                ),
                "4.1",
            ),
            _rt(
                21,
                "STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER",
                _member_key("StreamsGroupTargetAssignmentMemberKey"),
                _family(
                    "StreamsGroupTargetAssignmentMemberValue",
                    r.StreamsGroupTargetAssignmentMemberValue,
                    Layout("4.1+", STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE),
                ),
                "4.1",
            ),
            _rt(
                22,
                "STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT",
                _member_key("StreamsGroupCurrentMemberAssignmentKey"),
                _family(
                    "StreamsGroupCurrentMemberAssignmentValue",
                    r.StreamsGroupCurrentMemberAssignmentValue,
                    Layout("4.1+", STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE),
                ),
                "4.1",
            ),
            _rt(
                23,
                "STREAMS_GROUP_TOPOLOGY",
                _group_key("StreamsGroupTopologyKey"),
                _family(
                    "StreamsGroupTopologyValue",
                    r.StreamsGroupTopologyValue,
                    Layout("4.1+", STREAMS_GROUP_TOPOLOGY_VALUE),
                ),
                "4.1",
            ),
        )
    }
)

OFFSET_COMMIT_TYPES: Final = frozenset({0, 1})


# ============================================================================================
# `__share_group_state` -- the share coordinator's own topic (KIP-932), a registry of its own:
# its K=0/1 are not those of `__consumer_offsets`.  Facts from apache/kafka's share-coordinator
# message specs (ShareSnapshotKey/Value, ShareUpdateKey/Value) on the 4.0..4.3 branches:
#
# * keys: GroupId string, TopicId uuid, Partition int32 -- 4.0 called the prefix the key version
#   (ShareSnapshotKey "validVersions 0", ShareUpdateKey "1"), 4.1+ the record type (apiKey 0/1):
#   the same bytes;
# * values: V0, flexible.  4.1 changed both values *without a version bump* (KAFKA-18170 added
#   CreateTimestamp/WriteTimestamp to the snapshot; "Change snapshot epoch type to int32" turned
#   SnapshotEpoch from uint16 into int32 in both) -- two layouts of V0, like K=11/K=15 above;
# * 4.2 added DeliveryCompleteCount as tag 0 with default -1 (KIP-1226): compatible, one layout.

SHARE_PARTITION_KEY_FIELDS: Final = (F("GroupId", STRING), F("TopicId", UUID), F("Partition", INT32))

SHARE_STATE_BATCH: Final = _struct(
    "StateBatch",
    r.ShareStateBatch,
    F("FirstOffset", INT64),
    F("LastOffset", INT64),
    F("DeliveryState", INT8),
    F("DeliveryCount", INT16),
)
_DELIVERY_COMPLETE_COUNT = F("DeliveryCompleteCount", INT32, tag=0, default=-1, none_if=(-1,))

SHARE_SNAPSHOT_VALUE_41: Final = _struct(
    "ShareSnapshotValue",
    r.ShareSnapshotValue,
    F("SnapshotEpoch", INT32),
    F("StateEpoch", INT32),
    F("LeaderEpoch", INT32, none_if=(-1,)),
    F("StartOffset", INT64, none_if=(-1,)),
    _DELIVERY_COMPLETE_COUNT,
    F("CreateTimestamp", INT64, attr="create_timestamp_ms"),
    F("WriteTimestamp", INT64, attr="write_timestamp_ms"),
    F("StateBatches", ArrayOf(SHARE_STATE_BATCH)),
)
SHARE_SNAPSHOT_VALUE_40: Final = _struct(
    "ShareSnapshotValue",
    r.ShareSnapshotValue,
    F("SnapshotEpoch", UINT16),
    F("StateEpoch", INT32),
    F("LeaderEpoch", INT32, none_if=(-1,)),
    F("StartOffset", INT64, none_if=(-1,)),
    F("StateBatches", ArrayOf(SHARE_STATE_BATCH)),
)
SHARE_UPDATE_VALUE_41: Final = _struct(
    "ShareUpdateValue",
    r.ShareUpdateValue,
    F("SnapshotEpoch", INT32),
    F("LeaderEpoch", INT32, none_if=(-1,)),
    F("StartOffset", INT64, none_if=(-1,)),
    _DELIVERY_COMPLETE_COUNT,
    F("StateBatches", ArrayOf(SHARE_STATE_BATCH)),
)
SHARE_UPDATE_VALUE_40: Final = _struct(
    "ShareUpdateValue",
    r.ShareUpdateValue,
    F("SnapshotEpoch", UINT16),
    F("LeaderEpoch", INT32, none_if=(-1,)),
    F("StartOffset", INT64, none_if=(-1,)),
    F("StateBatches", ArrayOf(SHARE_STATE_BATCH)),
)

SHARE_GROUP_STATE_TOPIC: Final = "__share_group_state"

#: `__share_group_state`: K -> (key struct, value family); K>=2 is unknown (counted, skipped)
SHARE_STATE_RECORD_TYPES: Final[Mapping[int, RecordType]] = MappingProxyType(
    {
        rt.k: rt
        for rt in (
            _rt(
                0,
                "SHARE_SNAPSHOT",
                Struct("ShareSnapshotKey", SHARE_PARTITION_KEY_FIELDS, r.SharePartitionKey),
                _family(
                    "ShareSnapshotValue",
                    r.ShareSnapshotValue,
                    Layout("4.1+", SHARE_SNAPSHOT_VALUE_41),
                    Layout("4.0", SHARE_SNAPSHOT_VALUE_40),
                ),
                "4.0",
            ),
            _rt(
                1,
                "SHARE_UPDATE",
                Struct("ShareUpdateKey", SHARE_PARTITION_KEY_FIELDS, r.SharePartitionKey),
                _family(
                    "ShareUpdateValue",
                    r.ShareUpdateValue,
                    Layout("4.1+", SHARE_UPDATE_VALUE_41),
                    Layout("4.0", SHARE_UPDATE_VALUE_40),
                ),
                "4.0",
            ),
        )
    }
)

#: topic -> its registry (the `decode` command's ``--topic``, the golden vectors' ``topic``)
REGISTRIES: Final[Mapping[str, Mapping[int, RecordType]]] = MappingProxyType(
    {"__consumer_offsets": RECORD_TYPES, SHARE_GROUP_STATE_TOPIC: SHARE_STATE_RECORD_TYPES}
)
