"""Change events: what replay and expiry say changed, each a flat JSON dict with stable field names.

Every event carries the group id and the log position that caused it (``source_partition``,
``source_offset``, ``source_timestamp_ms``; all three are ``null`` for events of the mirror's own
clock, i.e. `state.expiry.expire`, which put ``at_ms`` instead).  ``type`` names the event.  Values
are scalars or lists of scalars -- never nested objects -- so that a Kafka topic consumer, a
Grafana annotation or a SQL engine can read them without schema gymnastics; topic-partitions are
written ``"topic:partition"`` (``:`` cannot occur in a Kafka topic name).

Two families:

* **discrete** events -- one per change, in log order (created, state changed, rebalance
  completed, rebalance timed, member joined/left/replaced, leader/protocol/kind changed, assignment
  changed, group deleted, expiry disagreement);
* **aggregate** events -- one per fold call and group (`OffsetsCommitted`, `OffsetsDeleted`), or
  per expiry call (`OffsetsExpired`): commits are ~99% of the topic and one event per commit would
  swamp every consumer of the stream.  They come after the discrete events of the same fold (and
  before a `GroupDeleted`, which flushes them), with the position of the last record they count.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Final

_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


@dataclass(frozen=True, slots=True)
class Event:
    group_id: str
    source_partition: int | None
    source_offset: int | None
    source_timestamp_ms: int | None

    TYPE: ClassVar[str] = "event"
    AGGREGATE: ClassVar[bool] = False

    def to_json(self) -> dict[str, Any]:
        # Fields hold scalars and tuples of scalars only: no need for asdict's recursive copy.
        # (``__dataclass_fields__`` would also list the ClassVars TYPE and AGGREGATE.)
        out: dict[str, Any] = {"type": self.TYPE}
        for name in _field_names(type(self)):
            v = getattr(self, name)
            out[name] = list(v) if isinstance(v, tuple) else v
        return out


@dataclass(frozen=True, slots=True)
class GroupCreated(Event):
    kind: str | None = None
    TYPE: ClassVar[str] = "group_created"


@dataclass(frozen=True, slots=True)
class GroupDeleted(Event):
    kind: str | None = None
    #: "tombstone" (the broker's group tombstone), "expired" (the broker's tombstone of a group the
    #: mirror found deletable -- Empty, no offsets -- or, where the broker writes no group tombstone
    #: (2.1-3.x generation 0), the mirror's own rule once the offsets' tombstones came)
    reason: str = "tombstone"
    #: the mirror's clock when its own rules deleted the group (no log position); None for a tombstone
    at_ms: int | None = None
    TYPE: ClassVar[str] = "group_deleted"


@dataclass(frozen=True, slots=True)
class KindChanged(Event):
    """Online conversion (4.x): classic <-> consumer, or a simple group taken over by a new kind."""

    before: str | None = None
    after: str | None = None
    TYPE: ClassVar[str] = "kind_changed"


@dataclass(frozen=True, slots=True)
class StateChanged(Event):
    before: str | None = None
    after: str | None = None
    #: when the group entered ``after`` (classic: currentStateTimestamp where written)
    since_ms: int | None = None
    TYPE: ClassVar[str] = "state_changed"


@dataclass(frozen=True, slots=True)
class RebalanceCompleted(Event):
    """A classic generation bump (K=2) or a modern target-assignment epoch bump (K=6/12/20).

    ``cause`` (issue 38, `state.causes`): "rebalance", or a modern bump that is none --
    "static_rejoin" (a static member came back and took its assignment again), "share_initialization"
    (a share group's partitions were initialised)."""

    before: int | None = None
    after: int | None = None
    #: generations/epochs that never reached the log (failed or superseded rebalances)
    skipped: int = 0
    cause: str = "rebalance"
    TYPE: ClassVar[str] = "rebalance_completed"


@dataclass(frozen=True, slots=True)
class RebalanceTimed(Event):
    """A rebalance the log timed (`state.timing`), emitted by the record that ended it (classic:
    the leader's SyncGroup record; KIP-848/share/streams: the last member reaching the target).

    ``started_ms``: the start of the join phase (classic: only a new group's, from its generation-0
    record) or the first record taking the settled group out of that state (modern); None when
    the log does not say.  ``assigned_ms``: the join phase's end / CompletingRebalance's start
    (classic ``currentStateTimestamp``), or the target assignment's time (modern; 4.3+'s
    AssignmentTimestamp).  ``stable_ms``: Stable again.  ``duration_ms`` = stable - started.
    ``joined`` / ``left``: member ids since the previous rebalance (at most 20 each; the counts
    are exact)."""

    kind: str | None = None
    generation: int = 0
    skipped: int = 0
    started_ms: int | None = None
    assigned_ms: int | None = None
    stable_ms: int = 0
    duration_ms: int | None = None
    members: int = 0
    joined: tuple[str, ...] = ()
    left: tuple[str, ...] = ()
    joined_count: int = 0
    left_count: int = 0
    TYPE: ClassVar[str] = "rebalance_timed"


@dataclass(frozen=True, slots=True)
class MemberJoined(Event):
    member_id: str = ""
    instance_id: str | None = None
    client_id: str | None = None
    client_host: str | None = None
    TYPE: ClassVar[str] = "member_joined"


@dataclass(frozen=True, slots=True)
class MemberLeft(Event):
    member_id: str = ""
    instance_id: str | None = None
    client_id: str | None = None
    TYPE: ClassVar[str] = "member_left"


@dataclass(frozen=True, slots=True)
class MemberReplaced(Event):
    """A static member (group.instance.id, KIP-345) came back with a new member id."""

    instance_id: str = ""
    before: str = ""
    after: str = ""
    TYPE: ClassVar[str] = "member_replaced"


@dataclass(frozen=True, slots=True)
class LeaderChanged(Event):
    before: str | None = None
    after: str | None = None
    TYPE: ClassVar[str] = "leader_changed"


@dataclass(frozen=True, slots=True)
class ProtocolChanged(Event):
    """Classic: the selected protocol (assignor); modern: the preferred server assignor."""

    before: str | None = None
    after: str | None = None
    TYPE: ClassVar[str] = "protocol_changed"


@dataclass(frozen=True, slots=True)
class AssignmentChanged(Event):
    member_id: str = ""
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    TYPE: ClassVar[str] = "assignment_changed"


@dataclass(frozen=True, slots=True)
class OffsetsCommitted(Event):
    #: commit records folded (n_commits summed when the caller collapsed commits)
    count: int = 0
    #: distinct topic-partitions whose stored offset changed
    partitions: int = 0
    topics: tuple[str, ...] = ()
    TYPE: ClassVar[str] = "offsets_committed"
    AGGREGATE: ClassVar[bool] = True


@dataclass(frozen=True, slots=True)
class OffsetsDeleted(Event):
    """Offset tombstones for live offsets that were not expiries (OffsetDelete, DeleteGroups,
    topic deletion)."""

    count: int = 0
    partitions: tuple[str, ...] = ()
    TYPE: ClassVar[str] = "offsets_deleted"
    AGGREGATE: ClassVar[bool] = True


@dataclass(frozen=True, slots=True)
class OffsetsExpired(Event):
    """Offsets that expired: ``origin`` "mirror" (the mirror's rules at ``at_ms``) or "broker" (a
    broker tombstone at or after the mirror's deadline, before the mirror swept)."""

    count: int = 0
    partitions: tuple[str, ...] = ()
    origin: str = "mirror"
    at_ms: int | None = None
    TYPE: ClassVar[str] = "offsets_expired"
    AGGREGATE: ClassVar[bool] = True


@dataclass(frozen=True, slots=True)
class ExpiryDisagreement(Event):
    """The broker and the mirror's expiry rules disagreed (a fidelity signal; see state/expiry.py).

    reason: "early_tombstone" -- the broker tombstoned an offset the rules kept alive and that no
    admin operation could have deleted; "unconfirmed" -- the mirror expired an offset (or deleted
    the group) and the broker wrote no tombstone within the grace period."""

    reason: str = ""
    partitions: tuple[str, ...] = ()
    deadline_ms: int | None = None
    #: when the mirror found an expiry unconfirmed (the record's time, or its own clock's when no
    #: record came); None for a disagreement a tombstone showed
    at_ms: int | None = None
    TYPE: ClassVar[str] = "expiry_disagreement"


@dataclass(frozen=True, slots=True)
class GroupQuarantined(Event):
    """The group's fold failed (the streaming adapter caught it at the group boundary): the group
    keeps its last good state; the source fields are the record being applied (if one failed)."""

    error_type: str = ""
    message: str = ""
    record_type: int | None = None
    #: the micro-batch's time (a fold of no record -- the expiry step -- has no log position)
    at_ms: int | None = None
    TYPE: ClassVar[str] = "group_quarantined"


@dataclass(frozen=True, slots=True)
class GroupRecovered(Event):
    """A quarantined group's fold succeeded again (source: the last record of that fold)."""

    at_ms: int | None = None
    TYPE: ClassVar[str] = "group_recovered"


@dataclass(frozen=True, slots=True)
class DriftSuspected(Event):
    """At start: records may have been removed from the topic while the mirror was not reading, so
    groups deleted meanwhile may look alive; a reconciliation round follows the catch-up.  A
    mirror-wide event (``group_id`` "").

    reason: "log_start" (a partition's log start offset is past the checkpoint's position;
    ``partitions``: "p:committed->start") or "downtime" (down longer than ``delete.retention.ms``)."""

    reason: str = ""
    partitions: tuple[str, ...] = ()
    at_ms: int | None = None
    TYPE: ClassVar[str] = "drift_suspected"


@dataclass(frozen=True, slots=True)
class ReconcileMismatch(Event):
    """The mirror's group list and the coordinators' (Admin ListGroups) disagreed for two rounds.

    side: "missing_in_coordinator" (the mirror holds a group the coordinator no longer has -- e.g. a
    tombstone compacted away while the mirror was down; it becomes ``exists: false``) or
    "missing_in_mirror" (the coordinator lists a group the mirror does not hold)."""

    side: str = ""
    at_ms: int | None = None
    TYPE: ClassVar[str] = "reconcile_mismatch"


EVENT_TYPES: Final[dict[str, type[Event]]] = {
    cls.TYPE: cls
    for cls in (
        GroupCreated,
        GroupDeleted,
        KindChanged,
        StateChanged,
        RebalanceCompleted,
        RebalanceTimed,
        MemberJoined,
        MemberLeft,
        MemberReplaced,
        LeaderChanged,
        ProtocolChanged,
        AssignmentChanged,
        OffsetsCommitted,
        OffsetsDeleted,
        OffsetsExpired,
        ExpiryDisagreement,
        GroupQuarantined,
        GroupRecovered,
        ReconcileMismatch,
        DriftSuspected,
    )
}


#: An event's identity -- what a consumer of the events topic deduplicates a re-sent micro-batch by --
#: the fields an event does not have counting as null.  ``(group_id, type, source_partition,
#: source_offset)`` alone is not unique: one group record yields an ``assignment_changed``,
#: ``member_joined`` or ``member_left`` per member (``member_id``) and a ``member_replaced`` per static
#: member (``instance_id``); one tombstone an ``expiry_disagreement`` of each ``reason``, and a group
#: tombstone two ``unconfirmed`` ones for different ``partitions``; the events of the mirror's own
#: clock (expiry, reconciliation, drift) have no log position and are told apart by ``at_ms`` --
#: the micro-batch's time, which a re-run of the batch keeps -- and ``reason``.
#: tests/test_state/test_events_key.py holds it unique over real scenario output and arbitrary logs.
EVENT_KEY: Final[tuple[str, ...]] = (
    "group_id",
    "type",
    "source_partition",
    "source_offset",
    "member_id",
    "instance_id",
    "reason",
    "partitions",
    "at_ms",
)


def event_key(body: Mapping[str, Any]) -> tuple[Any, ...]:
    """`EVENT_KEY`'s values of an event's JSON (`Event.to_json`), lists as tuples."""
    return tuple(tuple(v) if isinstance(v := body.get(name), list) else v for name in EVENT_KEY)


def tp_str(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


def event_from_json(obj: dict[str, Any]) -> Event:
    """The inverse of `Event.to_json` (for consumers of the event stream and for tests)."""
    cls = EVENT_TYPES[obj["type"]]
    kwargs: dict[str, Any] = {
        k: (tuple(v) if isinstance(v, list) else v) for k, v in obj.items() if k != "type"
    }
    return cls(**kwargs)
