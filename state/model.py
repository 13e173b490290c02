"""The in-memory shape of one group's mirror: `Group`, `Member`, offset entries, kinds and states.

Design (see state/README.md "Why mutable slotted classes"): replay is a *pure function of (state,
records)* -- the same input state and records always give the same output state and events -- but
it updates the `Group` it is given in place instead of copying it.  Folding a 50-partition commit
batch into a frozen structure would copy the offsets map per record; in place it is one dict store
per partition.  Callers that need the old value (tests, hypothesis properties) copy first
(`Group.copy`) or compare codec bytes.

Vocabulary follows Kafka's coordinator (4.x ``group-coordinator``): group kinds are Kafka's
``Group.GroupType`` plus ``simple`` (a classic group without a protocol type: the "simple consumer
group" the coordinator creates to hold offsets committed outside group membership); states are
Kafka's state names as the AdminClient prints them.
"""

from __future__ import annotations

from typing import Any, Final

# --------------------------------------------------------------------------------------- kinds
CLASSIC: Final = "classic"
CONSUMER: Final = "consumer"  # KIP-848
SHARE: Final = "share"  # KIP-932
STREAMS: Final = "streams"  # KIP-1071
SIMPLE: Final = "simple"  # classic group with no protocol type (offsets only)

# Kafka's GroupType names (what the AdminClient reports), per stored kind.
GROUP_TYPE_NAMES: Final = {
    CLASSIC: "Classic",
    SIMPLE: "Classic",
    CONSUMER: "Consumer",
    SHARE: "Share",
    STREAMS: "Streams",
}

# --------------------------------------------------------------------------------------- states
# Classic (ClassicGroupState): only Empty, Stable and Dead are ever observable from the log --
# PreparingRebalance and CompletingRebalance are never written (spec §7), so they are never set.
EMPTY: Final = "Empty"
STABLE: Final = "Stable"
DEAD: Final = "Dead"
# KIP-848 / KIP-932 / KIP-1071 (derived from epochs, ConsumerGroup.maybeUpdateGroupState):
ASSIGNING: Final = "Assigning"
RECONCILING: Final = "Reconciling"
NOT_READY: Final = "NotReady"  # streams only (StreamsGroup.maybeUpdateGroupState)

# Member states in K=8/K=14 (consumer/share MemberState) and K=22 (streams MemberState) -- the
# two enums differ: consumer 0 = STABLE, streams 1 = STABLE.
CONSUMER_MEMBER_STABLE: Final = 0
STREAMS_MEMBER_STABLE: Final = 1
MEMBER_STATE_NAMES: Final = {
    CONSUMER: {0: "STABLE", 1: "UNREVOKED_PARTITIONS", 2: "UNRELEASED_PARTITIONS", 127: "UNKNOWN"},
    SHARE: {0: "STABLE", 1: "UNREVOKED_PARTITIONS", 2: "UNRELEASED_PARTITIONS", 127: "UNKNOWN"},
    STREAMS: {1: "STABLE", 2: "UNREVOKED_TASKS", 3: "UNRELEASED_TASKS", 127: "UNKNOWN"},
}
LEAVE_GROUP_MEMBER_EPOCH: Final = -2  # what a K=8 tombstone sets (ConsumerGroupMember.Builder)

# ---------------------------------------------------------------------------- offset entries
# One committed offset is a plain tuple (cheap to build from numpy columns, compact to encode):
#   (offset, leader_epoch, metadata, commit_timestamp_ms, expire_timestamp_ms, topic_id,
#    source_partition, source_offset)
# ``None`` for absent optionals, as in the decoders' typed records.
O_OFFSET: Final = 0
O_LEADER_EPOCH: Final = 1
O_METADATA: Final = 2
O_COMMIT_TS: Final = 3
O_EXPIRE_TS: Final = 4
O_TOPIC_ID: Final = 5
O_SRC_PARTITION: Final = 6
O_SRC_OFFSET: Final = 7
OffsetEntry = tuple[int, "int | None", "str | None", int, "int | None", "str | None", int, int]
TopicPartition = tuple[str, int]

# Assignments: tuple of (topic-or-id, (partitions...)) sorted by topic; partitions sorted.
Assignment = tuple[tuple[str, tuple[int, ...]], ...]

# Counters kept per group (stable names: they are snapshot fields and metric sources).
COUNTERS: Final = (
    "records",  # records applied (after the idempotence filter)
    "rebalances",  # generation / assignment-epoch bumps seen in the log
    "skipped_generations",  # generations/epochs that never reached the log
    "member_joins",
    "member_leaves",
    "member_replacements",  # static member with a new member id (KIP-345)
    "leader_changes",
    "commits",  # offset-commit values applied (counting collapsed commits via n_commits)
    "offsets_deleted",  # tombstones for live offsets that were not expiries
    "offsets_expired",  # expiries (by the mirror's rules, or broker tombstones past the deadline)
    "expiry_disagreements",  # the broker and the mirror's rules disagreed (see state/expiry.py)
    "expiries_confirmed",  # mirror expiries the broker confirmed with its tombstone
    "unknown_records",  # record types this mirror does not know (never fatal)
    "decode_errors",  # rows the decoder could not decode (never fatal; kept in `errors`)
    "anomalies",  # records Kafka's own replay would reject (kept going, counted)
    # codec v2:
    "emptied",  # times the group became Empty from a state with members (its last member left)
    # codec v4 (issue 38): target assignment epoch bumps that are no rebalance (`state.causes`)
    "static_rejoins",  # a static member came back and took its assignment again
    "share_initializations",  # a share group's partitions were initialised
)
MAX_KEPT_ERRORS: Final = 20


def new_counters() -> dict[str, int]:
    return dict.fromkeys(COUNTERS, 0)


class Member:
    """One member, of any group kind.  Fields not carried by a kind's records stay ``None``.

    ``assignment`` is the member's *current* assignment: classic -- decoded from the K=2
    assignment bytes (topic names); KIP-848/share -- K=8/K=14 AssignedPartitions (topic **ids**,
    translated to names by the group's topic map at snapshot time); streams -- active tasks
    (subtopology id, partitions).  ``target`` is the KIP-848/share/streams target assignment (K=7 /
    K=13 / K=21) and lives on the group (`Group.targets`) because Kafka keys it separately.
    """

    __slots__ = (
        "assignment",
        "assignment_error",
        "client_host",
        "client_id",
        "extra",
        "instance_id",
        "member_epoch",
        "member_id",
        "member_state",
        "pending_revocation",
        "previous_member_epoch",
        "protocols",
        "rack_id",
        "rebalance_timeout_ms",
        "server_assignor",
        "session_timeout_ms",
        "subscribed_regex",
        "subscribed_topics",
        "subscription_error",
    )

    def __init__(self, member_id: str) -> None:
        self.member_id = member_id
        self.instance_id: str | None = None
        self.client_id: str = ""
        self.client_host: str = ""
        self.rack_id: str | None = None
        self.session_timeout_ms: int | None = None
        self.rebalance_timeout_ms: int | None = None
        self.subscribed_topics: tuple[str, ...] | None = None
        self.subscribed_regex: str | None = None
        self.server_assignor: str | None = None
        # KIP-848 classic-protocol members: supported protocol names, in the member's order.
        self.protocols: tuple[str, ...] | None = None
        self.assignment: Assignment = ()
        self.pending_revocation: Assignment = ()
        # Modern members start at epoch 0 in state STABLE (ConsumerGroupMember.Builder defaults).
        self.member_epoch: int | None = None
        self.previous_member_epoch: int | None = None
        self.member_state: int | None = None
        self.subscription_error: str | None = None
        self.assignment_error: str | None = None
        # Kind-specific extras (streams: topology_epoch, process_id, user_endpoint, client_tags,
        # standby/warmup tasks): a small dict, JSON-shaped.
        self.extra: dict[str, Any] | None = None

    def copy(self) -> Member:
        m = Member.__new__(Member)
        for name in Member.__slots__:
            setattr(m, name, getattr(self, name))
        if self.extra is not None:
            m.extra = dict(self.extra)
        return m

    def as_tuple(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in Member.__slots__)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Member) and self.as_tuple() == other.as_tuple()

    __hash__ = None  # type: ignore[assignment]  # mutable: compared by value, never hashed

    def __repr__(self) -> str:
        return f"Member({self.member_id!r}, instance={self.instance_id!r}, client={self.client_id!r})"


class Group:
    """The mirror of one group id: what the coordinator holds for it, plus counters and bookkeeping.

    ``kind is None`` means the coordinator has no group object for this id (never created, or
    deleted while the mirror still waits for the broker's confirming tombstones -- see
    `state.expiry`).  `exists` is what the HTTP API should answer.
    """

    __slots__ = (
        "assignment_epoch",
        "bump_flags",
        "commit_window",
        "counters",
        "created_ms",
        "current_state_timestamp_ms",
        "errors",
        "generation",
        "group_epoch",
        "group_id",
        "kind",
        "last_change_ms",
        "last_leader",
        "last_position",
        "last_protocol",
        "last_rebalance_ms",
        "last_timing",
        "leader",
        "members",
        "metadata_hash",
        "offsets",
        "pending",
        "protocol",
        "protocol_type",
        "recent_static_leaves",
        "regexes",
        "share_topics",
        "state",
        "state_since_ms",
        "targets",
        "timing",
        "topic_names",
        "topology",
        "topology_epoch",
        "validated_topology_epoch",
    )

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.kind: str | None = None
        self.protocol_type: str | None = None
        self.state: str = DEAD
        self.state_since_ms: int | None = None
        self.created_ms: int | None = None
        self.last_change_ms: int | None = None
        # record time of the last completed rebalance (generation / assignment-epoch bump); None
        # until one is seen -- and for state migrated from codec v1, until the next one
        self.last_rebalance_ms: int | None = None
        # classic
        self.current_state_timestamp_ms: int | None = None  # K=2 V2+ currentStateTimestamp, raw
        # None until a K=2 record was seen (a simple group created by commits has no generation);
        # 0 for the 4.x "new empty group" record written while the first members are joining.
        self.generation: int | None = None
        self.protocol: str | None = None
        self.leader: str | None = None
        self.last_protocol: str | None = None  # last non-null selected protocol (change detection)
        self.last_leader: str | None = None  # last non-null leader (change detection)
        # KIP-848 / share / streams
        self.group_epoch: int | None = None
        self.assignment_epoch: int | None = None
        self.metadata_hash: int | None = None
        self.topology_epoch: int | None = None  # streams: K=23 topology epoch
        self.validated_topology_epoch: int | None = None  # streams: K=17 tag 0 (4.2+)
        self.topology: dict[str, Any] | None = None  # streams: {"source_topics": [...], ...}
        self.targets: dict[str, Assignment] = {}  # member id -> target assignment (ids / tasks)
        self.regexes: dict[str, tuple[str, ...]] = {}  # K=16: regex -> resolved topics
        self.share_topics: dict[str, Any] | None = None  # K=15 initialized/initializing/deleting
        self.members: dict[str, Member] = {}
        # shared
        self.topic_names: dict[str, str] = {}  # topic id (Kafka base64) -> name, learned from the log
        self.offsets: dict[TopicPartition, OffsetEntry] = {}
        # Expiries the mirror applied that the broker has not confirmed yet:
        # (topic, partition) -> the mirror's deadline; ("", -1) stands for the group tombstone.
        self.pending: dict[TopicPartition, int] = {}
        # instance id -> (member id, record timestamp) of the last static member that left,
        # to recognise a replacement written as "old leaves, new joins" in one coordinator write.
        self.recent_static_leaves: dict[str, tuple[str, int]] = {}
        self.counters: dict[str, int] = new_counters()
        self.errors: list[dict[str, Any]] = []  # last MAX_KEPT_ERRORS decode errors / unknown records
        self.last_position: tuple[int, int] | None = None  # (partition, offset) of the last applied record
        # codec v3 (issue 26): rebalance timing (`state.timing`) and commit rhythm (`state.rhythm`)
        self.timing: Any = None  # state.timing.Tracker while the fold follows the group's rebalances
        self.last_timing: Any = None  # state.timing.Timing of the last timed rebalance
        # (log time ms, commits counter) points, oldest first, packed (`state.rhythm.Window`)
        self.commit_window: bytes = b""
        # codec v4 (issue 38): what happened since the last target assignment epoch bump, the
        # bits of `state.causes` (members joined, left, replaced; metadata; share initialisation)
        self.bump_flags: int = 0

    # ------------------------------------------------------------------------------ derived
    def reset_kind_fields(self) -> None:
        """Forget everything that belongs to one kind of group object (classic generation and
        protocol, modern epochs, topology, targets, regexes) -- what the coordinator drops when it
        removes or converts the group object; offsets, counters and bookkeeping stay."""
        self.protocol_type = None
        self.current_state_timestamp_ms = None
        self.generation = None
        self.protocol = None
        self.leader = None
        self.group_epoch = None
        self.assignment_epoch = None
        self.metadata_hash = None
        self.topology_epoch = None
        self.validated_topology_epoch = None
        self.topology = None
        self.share_topics = None
        self.targets = {}
        self.regexes = {}

    @property
    def exists(self) -> bool:
        """Whether the coordinator holds a group object for this id (what the API shows)."""
        return self.kind is not None

    @property
    def display_kind(self) -> str | None:
        """``simple`` for a classic group without a protocol type (Kafka: "simple consumer group")."""
        if self.kind == CLASSIC and self.protocol_type is None and not self.members:
            return SIMPLE
        return self.kind

    @property
    def group_type(self) -> str | None:
        return None if self.kind is None else GROUP_TYPE_NAMES[self.kind]

    def copy(self) -> Group:
        g = Group.__new__(Group)
        for name in Group.__slots__:
            setattr(g, name, getattr(self, name))
        g.members = {k: m.copy() for k, m in self.members.items()}
        g.targets = dict(self.targets)
        g.regexes = dict(self.regexes)
        g.topic_names = dict(self.topic_names)
        g.offsets = dict(self.offsets)
        g.pending = dict(self.pending)
        g.recent_static_leaves = dict(self.recent_static_leaves)
        g.counters = dict(self.counters)
        g.errors = [dict(e) for e in self.errors]
        g.topology = None if self.topology is None else dict(self.topology)
        g.share_topics = None if self.share_topics is None else dict(self.share_topics)
        if self.timing is not None:
            g.timing = type(self.timing).from_row(self.timing.to_row())
        return g

    def as_tuple(self) -> tuple[Any, ...]:
        """Every field, for equality (tests and hypothesis properties)."""
        out = []
        for name in Group.__slots__:
            v = getattr(self, name)
            if name == "members":
                v = {k: m.as_tuple() for k, m in v.items()}
            elif name == "timing" and v is not None:
                v = v.to_row()
            out.append(v)
        return tuple(out)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Group) and self.as_tuple() == other.as_tuple()

    __hash__ = None  # type: ignore[assignment]  # mutable: compared by value, never hashed

    def __repr__(self) -> str:
        return (
            f"Group({self.group_id!r}, kind={self.display_kind}, state={self.state}, "
            f"members={len(self.members)}, offsets={len(self.offsets)})"
        )

    def topic_name(self, topic_id: str) -> str:
        """A topic id translated with what the log showed, falling back to the id itself."""
        return self.topic_names.get(topic_id, topic_id)

    def keep_error(self, err: dict[str, Any]) -> None:
        self.errors.append(err)
        if len(self.errors) > MAX_KEPT_ERRORS:
            del self.errors[0]
