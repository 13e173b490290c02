"""Scenario builders in Kafka's own test style: a group is *a list of records*, replayed.

`Log` hands out consecutive log positions and a clock, and builds typed `decoders` records for one
``__consumer_offsets`` partition: ``log.commit(...)``, ``log.classic(...)``, ``log.k848_member(...)``
... each returns the record and appends it to ``log.records``.  Time only moves when a test says so
(``log.tick(ms)``) -- replay and expiry take time as an argument.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from decoders.batch import result_columns
from decoders.columns import DECODED
from decoders.records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerAssignment,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerSubscription,
    ConsumerTopicPartitions,
    DecodeError,
    ErrorKind,
    GroupKey,
    GroupMember,
    GroupMetadataValue,
    MemberKey,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    RegularExpressionKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataValue,
    Source,
    StreamsGroupCurrentMemberAssignmentValue,
    StreamsGroupMemberMetadataValue,
    StreamsGroupMetadataValue,
    StreamsGroupTargetAssignmentMemberValue,
    StreamsGroupTargetAssignmentMetadataValue,
    StreamsGroupTopologyValue,
    Subtopology,
    TaskIds,
    TopicIdPartitions,
    TopicMetadata,
    TopicPartitionsInfo,
    UnknownRecord,
)

T0 = 1_790_000_000_000
MIN = 60_000
HOUR = 3_600_000
DAY = 24 * HOUR

AnyRecord = Record[Any, Any] | UnknownRecord | DecodeError


def cm(
    member_id: str,
    topics: Sequence[str] = ("t",),
    assigned: dict[str, Sequence[int]] | None = None,
    **kw: Any,
) -> GroupMember:
    """A classic ``consumer`` member with decoded subscription/assignment."""
    assigned = assigned or {}
    return GroupMember(
        member_id=member_id,
        group_instance_id=kw.get("instance_id"),
        client_id=kw.get("client_id", f"client-{member_id}"),
        client_host=kw.get("host", "/10.0.0.1"),
        rebalance_timeout_ms=kw.get("rebalance_timeout_ms", 300_000),
        session_timeout_ms=kw.get("session_timeout_ms", 45_000),
        subscription=b"\x00",
        assignment=b"\x00",
        consumer_subscription=ConsumerSubscription(version=3, topics=tuple(topics)),
        consumer_assignment=ConsumerAssignment(
            version=3,
            assigned_partitions=tuple(ConsumerTopicPartitions(t, tuple(ps)) for t, ps in assigned.items()),
        ),
    )


def tip(topic_id: str, *partitions: int) -> TopicIdPartitions:
    return TopicIdPartitions(topic_id, tuple(partitions))


class Log:
    """One ``__consumer_offsets`` partition being written: positions and time advance per record."""

    def __init__(self, partition: int = 0, start_offset: int = 0, now_ms: int = T0) -> None:
        self.partition = partition
        self.offset = start_offset
        self.now_ms = now_ms
        self.records: list[AnyRecord] = []

    # -- plumbing ---------------------------------------------------------------------------
    def tick(self, ms: int) -> Log:
        self.now_ms += ms
        return self

    def _src(self) -> Source:
        s = Source(self.partition, self.offset, self.now_ms)
        self.offset += 1
        return s

    def _add(self, rec: AnyRecord) -> AnyRecord:
        self.records.append(rec)
        return rec

    def rec(self, record_type: int, key: Any, value: Any, version: int | None = 0) -> AnyRecord:
        return self._add(Record(self._src(), record_type, key, None if value is None else version, value))

    # -- offsets ----------------------------------------------------------------------------
    def commit(
        self,
        group: str,
        topic: str,
        partition: int,
        offset: int,
        *,
        leader_epoch: int | None = None,
        metadata: str | None = None,
        commit_ts: int | None = None,
        expire_ts: int | None = None,
        topic_id: str | None = None,
        legacy: bool = False,
    ) -> AnyRecord:
        value = OffsetCommitValue(
            offset=offset,
            leader_epoch=leader_epoch,
            metadata=metadata,
            commit_timestamp_ms=self.now_ms if commit_ts is None else commit_ts,
            expire_timestamp_ms=expire_ts,
            topic_id=topic_id,
        )
        version = 0 if legacy else (1 if expire_ts is not None else 4)
        return self.rec(0 if legacy else 1, OffsetCommitKey(group, topic, partition), value, version)

    def offset_tombstone(self, group: str, topic: str, partition: int, legacy: bool = False) -> AnyRecord:
        return self.rec(0 if legacy else 1, OffsetCommitKey(group, topic, partition), None)

    # -- classic ----------------------------------------------------------------------------
    def classic(
        self,
        group: str,
        generation: int,
        members: Sequence[GroupMember] = (),
        *,
        protocol_type: str | None = "consumer",
        protocol: str | None = "range",
        leader: str | None = None,
        state_ts: int | None = -1,
    ) -> AnyRecord:
        """A K=2 record; ``state_ts=-1`` (default) stamps the current time, None = V0/V1 (unknown)."""
        value = GroupMetadataValue(
            protocol_type=protocol_type,
            generation=generation,
            protocol=protocol if members else None,
            leader=(leader or members[0].member_id) if members else None,
            current_state_timestamp_ms=self.now_ms if state_ts == -1 else state_ts,
            members=tuple(members),
        )
        return self.rec(2, GroupKey(group), value, 3)

    def new_empty_group(self, group: str) -> AnyRecord:
        """4.x: a JoinGroup that creates a classic group writes this first."""
        return self.classic(group, 0, (), protocol_type=None, protocol=None)

    def classic_tombstone(self, group: str) -> AnyRecord:
        return self.rec(2, GroupKey(group), None)

    # -- KIP-848 ----------------------------------------------------------------------------
    def k848_epoch(self, group: str, epoch: int | None) -> AnyRecord:
        return self.rec(
            3, GroupKey(group), None if epoch is None else ConsumerGroupMetadataValue(epoch=epoch)
        )

    def k848_partition_metadata(self, group: str, topics: dict[str, str] | None) -> AnyRecord:
        value = (
            None
            if topics is None
            else ConsumerGroupPartitionMetadataValue(
                topics=tuple(TopicMetadata(tid, name, 3) for tid, name in topics.items())
            )
        )
        return self.rec(4, GroupKey(group), value)

    def k848_member(
        self,
        group: str,
        member: str,
        topics: Sequence[str] | None = ("t",),
        *,
        instance_id: str | None = None,
        regex: str | None = None,
        assignor: str | None = None,
        protocols: Sequence[str] | None = None,
        client_id: str | None = None,
    ) -> AnyRecord:
        if topics is None:
            return self.rec(5, MemberKey(group, member), None)
        value = ConsumerGroupMemberMetadataValue(
            instance_id=instance_id,
            rack_id=None,
            client_id=client_id or f"client-{member}",
            client_host="/10.0.0.2",
            subscribed_topic_names=tuple(topics),
            subscribed_topic_regex=regex,
            rebalance_timeout_ms=300_000,
            server_assignor=assignor,
            classic_member_metadata=None
            if protocols is None
            else ClassicMemberMetadata(45_000, tuple(ClassicProtocol(p, b"") for p in protocols)),
        )
        return self.rec(5, MemberKey(group, member), value)

    def k848_target_epoch(self, group: str, epoch: int | None) -> AnyRecord:
        value = None if epoch is None else ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=epoch)
        return self.rec(6, GroupKey(group), value)

    def k848_target(self, group: str, member: str, parts: Sequence[TopicIdPartitions] | None) -> AnyRecord:
        value = (
            None if parts is None else ConsumerGroupTargetAssignmentMemberValue(topic_partitions=tuple(parts))
        )
        return self.rec(7, MemberKey(group, member), value)

    def k848_current(
        self,
        group: str,
        member: str,
        epoch: int | None,
        parts: Sequence[TopicIdPartitions] = (),
        *,
        previous: int | None = None,
        state: int = 0,
        pending: Sequence[TopicIdPartitions] = (),
    ) -> AnyRecord:
        if epoch is None:
            return self.rec(8, MemberKey(group, member), None)
        value = ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=epoch,
            previous_member_epoch=epoch - 1 if previous is None else previous,
            assigned_partitions=tuple(parts),
            partitions_pending_revocation=tuple(pending),
            state=state,
        )
        return self.rec(8, MemberKey(group, member), value)

    def k848_regex(self, group: str, regex: str, topics: Sequence[str] | None) -> AnyRecord:
        value = None if topics is None else ConsumerGroupRegularExpressionValue(tuple(topics), 1, self.now_ms)
        return self.rec(16, RegularExpressionKey(group, regex), value)

    def k848_stable_group(
        self,
        group: str,
        members: dict[str, tuple[Sequence[str], Sequence[TopicIdPartitions]]],
        epoch: int = 1,
    ) -> None:
        """A KIP-848 group written all the way to Stable at ``epoch`` (one write per step)."""
        for mid, (topics, _) in members.items():
            self.k848_member(group, mid, topics)
        self.k848_epoch(group, epoch)
        for mid, (_, parts) in members.items():
            self.k848_target(group, mid, parts)
        self.k848_target_epoch(group, epoch)
        for mid, (_, parts) in members.items():
            self.k848_current(group, mid, epoch, parts)

    def k848_leave(self, group: str, member: str) -> None:
        """ConsumerGroupMember leaving: K=8, K=7, K=5 tombstones (4.x order)."""
        self.k848_current(group, member, None)
        self.k848_target(group, member, None)
        self.k848_member(group, member, None)

    def k848_delete(self, group: str, members: Sequence[str] = ()) -> None:
        """ConsumerGroup.createGroupTombstoneRecords order: K=8s, K=7s, K=6, K=5s, (K=16s), K=4, K=3."""
        for m in members:
            self.k848_current(group, m, None)
        for m in members:
            self.k848_target(group, m, None)
        self.k848_target_epoch(group, None)
        for m in members:
            self.k848_member(group, m, None)
        self.k848_partition_metadata(group, None)
        self.k848_epoch(group, None)

    # -- share ------------------------------------------------------------------------------
    def share_epoch(self, group: str, epoch: int | None) -> AnyRecord:
        return self.rec(11, GroupKey(group), None if epoch is None else ShareGroupMetadataValue(epoch, 1))

    def share_member(self, group: str, member: str, topics: Sequence[str] | None = ("t",)) -> AnyRecord:
        value = (
            None
            if topics is None
            else ShareGroupMemberMetadataValue(None, f"client-{member}", "/10.0.0.3", tuple(topics))
        )
        return self.rec(10, MemberKey(group, member), value)

    def share_target_epoch(self, group: str, epoch: int) -> AnyRecord:
        return self.rec(12, GroupKey(group), ShareGroupTargetAssignmentMetadataValue(epoch))

    def share_target(self, group: str, member: str, parts: Sequence[TopicIdPartitions]) -> AnyRecord:
        return self.rec(13, MemberKey(group, member), ShareGroupTargetAssignmentMemberValue(tuple(parts)))

    def share_current(
        self, group: str, member: str, epoch: int, parts: Sequence[TopicIdPartitions]
    ) -> AnyRecord:
        value = ShareGroupCurrentMemberAssignmentValue(epoch, epoch - 1, 0, tuple(parts))
        return self.rec(14, MemberKey(group, member), value)

    def share_state(self, group: str, initialized: dict[str, str]) -> AnyRecord:
        value = ShareGroupStatePartitionMetadataValue(
            initialized_topics=tuple(
                TopicPartitionsInfo(tid, name, (0, 1)) for tid, name in initialized.items()
            ),
            deleting_topics=(),
            initializing_topics=(),
        )
        return self.rec(15, GroupKey(group), value)

    # -- streams ----------------------------------------------------------------------------
    def streams_epoch(self, group: str, epoch: int | None, validated: int | None = 0) -> AnyRecord:
        value = (
            None
            if epoch is None
            else StreamsGroupMetadataValue(epoch, 42, validated_topology_epoch=validated)
        )
        return self.rec(17, GroupKey(group), value)

    def streams_topology(self, group: str, epoch: int, sources: Sequence[str]) -> AnyRecord:
        sub = Subtopology("0", tuple(sources), (), (), (), (), ())
        return self.rec(23, GroupKey(group), StreamsGroupTopologyValue(epoch, (sub,)))

    def streams_member(self, group: str, member: str) -> AnyRecord:
        value = StreamsGroupMemberMetadataValue(
            None, None, f"client-{member}", "/10.0.0.4", 300_000, 0, "proc-1", None, ()
        )
        return self.rec(19, MemberKey(group, member), value)

    def streams_target_epoch(self, group: str, epoch: int) -> AnyRecord:
        return self.rec(20, GroupKey(group), StreamsGroupTargetAssignmentMetadataValue(epoch))

    def streams_target(self, group: str, member: str, partitions: Sequence[int]) -> AnyRecord:
        value = StreamsGroupTargetAssignmentMemberValue((TaskIds("0", tuple(partitions)),), (), ())
        return self.rec(21, MemberKey(group, member), value)

    def streams_current(
        self, group: str, member: str, epoch: int, partitions: Sequence[int], state: int = 1
    ) -> AnyRecord:
        active = (TaskIds("0", tuple(partitions)),) if partitions else ()
        value = StreamsGroupCurrentMemberAssignmentValue(epoch, epoch - 1, state, active, (), (), (), (), ())
        return self.rec(22, MemberKey(group, member), value)

    # -- odd records ------------------------------------------------------------------------
    def unknown(self, record_type: int = 99) -> AnyRecord:
        return self._add(UnknownRecord(self._src(), record_type, b"\x00\x63", b"\x00\x00"))

    def decode_error(self, group: str, record_type: int = 2) -> AnyRecord:
        return self._add(
            DecodeError(
                self._src(),
                record_type,
                3,
                "value",
                "members[0].clientHost",
                17,
                ErrorKind.TRUNCATED,
                "truncated: string of 9 bytes, 2 left",
                key=GroupKey(group),
            )
        )


# ------------------------------------------------------------------------------------------
# Records -> one group's rows as `state.fold.fold_columns` takes them (the packed group unpacked)


def columns(records: Sequence[AnyRecord], *, n_commits: Sequence[int] | None = None) -> dict[str, list[Any]]:
    """The batch decoder's columns for these records (rows in the given order, the decoder's own
    row builder `decoders.batch.result_columns`), as lists; ``n_commits``: the collapse counter."""
    names = [c.name for c in DECODED]
    rows = []
    for r in records:
        row: dict[str, Any] = dict.fromkeys(names)
        row.update(result_columns(r))
        s = r.source
        row.update(source_partition=s.partition, source_offset=s.offset, source_timestamp_ms=s.timestamp_ms)
        rows.append(row)
    cols = {name: [row[name] for row in rows] for name in names}
    if n_commits is not None:
        cols["n_commits"] = list(n_commits)
    return cols
