"""Replay: one pure function per record type, in one dispatch table, folding records into a `Group`.

Modelled on the 4.x coordinator's ``replay`` methods (``GroupMetadataManager``,
``OffsetMetadataManager``): each record type has one ``replay_*`` function, a tombstone is an
explicit branch of it, and `DISPATCH` maps the record type K to the function.  A function gets the
group (never ``None``: a fresh `Group` whose ``kind is None`` stands for "no group object"), the
record and the fold context, and returns the group -- or ``None`` when the coordinator would no
longer hold anything for the id (the adapter then removes the state row).

Semantics that differ from the naive reading of the log (each cites the coordinator code):

* **Offsets outlive their group object.**  A group tombstone (K=2, K=3, K=11, K=17) removes the
  *group*; offsets are removed only by their own tombstones.  If offsets remain, the id lives on as
  the coordinator's "simple" classic group -- what ``OffsetMetadataManager.replay`` creates
  (``getOrMaybeCreateClassicGroup(groupId, true)``) for offsets without a group, and exactly the
  4.x classic->consumer conversion: a K=2 tombstone followed by K=3..8 records, offsets kept
  (``GroupMetadataManager``: ``classicGroup.createGroupTombstoneRecords`` then
  ``consumerGroup.createConsumerGroupRecords``).  A modern record then takes the simple group over
  (``getOrMaybeCreatePersistedConsumerGroup`` replaces a simple classic group).
* **An offset commit creates a simple group** when none exists (same ``OffsetMetadataManager.replay``).
* **Newest log position wins.**  4.x stores a replayed commit unconditionally and materialises a
  committed transaction's offsets only if their *record* offset is newer than the stored one
  (``replayEndTransactionMarker``).  Under ``read_committed`` the reader sees committed
  transactional records at their log position, so "apply in log order" is the same rule; records
  at or before `Group.last_position` are ignored (replays after a restart are idempotent).
* **K=0 and K=1** are different keys for compaction but the same offset: both replay here.
* **KIP-848 member lifecycle**: K=5 or K=8 creates a member, only a K=5 tombstone removes it; a K=8
  tombstone sets its epochs to -2 (``ConsumerGroupMember.Builder``); group state is derived from
  epochs after every record (``ConsumerGroup.maybeUpdateGroupState``).
* Unknown record types and decode errors are counted and kept, never fatal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from decoders.records import (
    ConsumerAssignment,
    DecodeError,
    GroupMember,
    Record,
    TaskIds,
    TopicIdPartitions,
    UnknownRecord,
)
from state import events as ev
from state.config import DEFAULT_CONFIG, OffsetConfig
from state.expiry import GROUP_TOMBSTONE, check_pending, classify_tombstone, mark_dead
from state.model import (
    ASSIGNING,
    CLASSIC,
    CONSUMER,
    CONSUMER_MEMBER_STABLE,
    DEAD,
    EMPTY,
    LEAVE_GROUP_MEMBER_EPOCH,
    NOT_READY,
    RECONCILING,
    SHARE,
    STABLE,
    STREAMS,
    STREAMS_MEMBER_STABLE,
    Assignment,
    Group,
    Member,
    OffsetEntry,
    TopicPartition,
)
from state.votes import preferred_server_assignor

Position = tuple[int, int]


@dataclass(frozen=True, slots=True)
class FoldResult:
    """``group`` is ``None`` when nothing is left to keep for the id (call ``state.remove()``)."""

    group: Group | None
    events: list[ev.Event]
    #: unknown record types and decode errors seen in this fold (also counted in the group when one
    #: exists), as dicts: kind, partition, offset, record_type, reason, field
    skipped: list[dict[str, Any]]


class FoldContext:
    """Per-fold scratch: events in order, and the aggregates emitted once per fold."""

    __slots__ = (
        "broker_expired",
        "commit_topics",
        "commits",
        "committed",
        "config",
        "deleted",
        "events",
        "last_src",
        "skipped",
    )

    def __init__(self, config: OffsetConfig) -> None:
        self.config = config
        self.events: list[ev.Event] = []
        self.skipped: list[dict[str, Any]] = []
        self.commits = 0
        self.committed: set[TopicPartition] = set()
        self.commit_topics: set[str] = set()
        self.deleted: list[TopicPartition] = []
        self.broker_expired: list[TopicPartition] = []
        # (partition, offset, timestamp) of the last record counted in each aggregate
        self.last_src: dict[str, tuple[int, int, int]] = {}

    def flush(self, group_id: str) -> None:
        """Emit the aggregate events (before a GroupDeleted, and at the end of the fold)."""
        if self.commits:
            p, o, t = self.last_src["commit"]
            self.events.append(
                ev.OffsetsCommitted(
                    group_id,
                    p,
                    o,
                    t,
                    count=self.commits,
                    partitions=len(self.committed),
                    topics=tuple(sorted(self.commit_topics)),
                )
            )
            self.commits = 0
            self.committed = set()
            self.commit_topics = set()
        if self.broker_expired:
            p, o, t = self.last_src["expired"]
            self.events.append(
                ev.OffsetsExpired(
                    group_id,
                    p,
                    o,
                    t,
                    count=len(self.broker_expired),
                    partitions=tuple(ev.tp_str(*tp) for tp in self.broker_expired),
                    origin="broker",
                    at_ms=t,
                )
            )
            self.broker_expired = []
        if self.deleted:
            p, o, t = self.last_src["deleted"]
            self.events.append(
                ev.OffsetsDeleted(
                    group_id,
                    p,
                    o,
                    t,
                    count=len(self.deleted),
                    partitions=tuple(ev.tp_str(*tp) for tp in self.deleted),
                )
            )
            self.deleted = []


Src = tuple[int, int, int]  # (partition, offset, timestamp_ms) of the record being replayed


def _src(rec: Record[Any, Any] | UnknownRecord | DecodeError) -> Src:
    s = rec.source
    return (s.partition, s.offset, s.timestamp_ms)


# ============================================================================================
# Shared helpers: existence, kind, state, members


def _touch(g: Group, src: Src) -> None:
    g.last_change_ms = src[2]


def ensure_kind(g: Group, kind: str, src: Src, ctx: FoldContext) -> None:
    """Make the group a ``kind`` group: create it, or convert it (4.x online migration / a simple
    group taken over by a modern group, ``getOrMaybeCreatePersistedConsumerGroup``)."""
    if g.kind == kind:
        return
    p, o, t = src
    if g.kind is None:
        g.kind = kind
        g.created_ms = t
        g.state = EMPTY
        g.state_since_ms = t
        ctx.events.append(ev.GroupCreated(g.group_id, p, o, t, kind=kind if kind != CLASSIC else CLASSIC))
        return
    before = g.display_kind
    if not (g.kind == CLASSIC and g.protocol_type is None and not g.members):
        # Kafka's replay throws IllegalStateException("... is not a consumer group") unless the
        # group is simple; the log was written by a coordinator that did convert, so follow it.
        g.counters["anomalies"] += 1
    for mid in sorted(g.members):
        _remove_member(g, mid, src, ctx)
    kind_fields_reset(g)
    g.kind = kind
    ctx.events.append(ev.KindChanged(g.group_id, p, o, t, before=before, after=kind))


def kind_fields_reset(g: Group) -> None:
    g.reset_kind_fields()


def set_state(g: Group, state: str, since_ms: int | None, src: Src, ctx: FoldContext) -> None:
    if g.state == state:
        return
    before = g.state
    g.state = state
    g.state_since_ms = since_ms
    if state == EMPTY and before != DEAD:
        g.counters["emptied"] += 1  # the last member left (flapping Empty <-> Stable is counted here)
    p, o, t = src
    ctx.events.append(ev.StateChanged(g.group_id, p, o, t, before=before, after=state, since_ms=since_ms))


def _assignment_names(g: Group, a: Assignment, by_id: bool) -> set[str]:
    if by_id:
        return {ev.tp_str(g.topic_name(t), p) for t, ps in a for p in ps}
    return {ev.tp_str(t, p) for t, ps in a for p in ps}


def _assignment_event(
    g: Group, member_id: str, change: tuple[Assignment, Assignment], src: Src, ctx: FoldContext
) -> None:
    before, after = change
    if before == after:
        return
    by_id = g.kind in (CONSUMER, SHARE)
    b = _assignment_names(g, before, by_id)
    a = _assignment_names(g, after, by_id)
    if a == b:
        return
    p, o, t = src
    ctx.events.append(
        ev.AssignmentChanged(
            g.group_id, p, o, t, member_id=member_id, added=tuple(sorted(a - b)), removed=tuple(sorted(b - a))
        )
    )


def _add_member(g: Group, m: Member, src: Src, ctx: FoldContext) -> None:
    """A member appears: joined, or -- a static member with a new member id -- replaced."""
    p, o, t = src
    g.members[m.member_id] = m
    x = m.instance_id
    if x:
        old = next((other for other in g.members.values() if other.instance_id == x and other is not m), None)
        if old is not None:
            g.counters["member_replacements"] += 1
            ctx.events.append(
                ev.MemberReplaced(g.group_id, p, o, t, instance_id=x, before=old.member_id, after=m.member_id)
            )
            return
        recent = g.recent_static_leaves.pop(x, None)
        if recent is not None and recent[1] == t:
            # "old member leaves, new member joins" in one coordinator write (same record time).
            g.counters["member_replacements"] += 1
            ctx.events.append(
                ev.MemberReplaced(g.group_id, p, o, t, instance_id=x, before=recent[0], after=m.member_id)
            )
            return
    g.counters["member_joins"] += 1
    ctx.events.append(
        ev.MemberJoined(
            g.group_id,
            p,
            o,
            t,
            member_id=m.member_id,
            instance_id=x,
            client_id=m.client_id,
            client_host=m.client_host,
        )
    )


def _remove_member(g: Group, member_id: str, src: Src, ctx: FoldContext) -> None:
    m = g.members.pop(member_id, None)
    if m is None:
        return
    x = m.instance_id
    if x and any(other.instance_id == x for other in g.members.values()):
        return  # the tail of a static replacement already reported as MemberReplaced
    p, o, t = src
    if x:
        g.recent_static_leaves = {k: v for k, v in g.recent_static_leaves.items() if v[1] == t}
        g.recent_static_leaves[x] = (member_id, t)
    g.counters["member_leaves"] += 1
    ctx.events.append(
        ev.MemberLeft(g.group_id, p, o, t, member_id=member_id, instance_id=x, client_id=m.client_id)
    )


def drop_group(g: Group, src: Src, ctx: FoldContext) -> Group | None:
    """The coordinator removed its group object (a group tombstone).  Offsets that remain keep the
    id alive as a simple classic group; otherwise the group is gone."""
    p, o, t = src
    if GROUP_TOMBSTONE in g.pending:
        del g.pending[GROUP_TOMBSTONE]
        g.counters["expiries_confirmed"] += 1
    if g.kind is not None:
        for mid in sorted(g.members):
            _remove_member(g, mid, src, ctx)
    if g.offsets:
        if g.kind is None:
            return g
        before = g.display_kind
        kind_fields_reset(g)
        g.kind = CLASSIC
        if before != g.display_kind:
            ctx.events.append(ev.KindChanged(g.group_id, p, o, t, before=before, after=g.display_kind))
        set_state(g, EMPTY, t, src, ctx)
        return g
    leftover = [tp for tp in g.pending if tp != GROUP_TOMBSTONE]
    if leftover:
        # The mirror expired these, yet the broker deleted the group without tombstoning them.
        g.counters["expiry_disagreements"] += len(leftover)
        ctx.events.append(
            ev.ExpiryDisagreement(
                g.group_id,
                p,
                o,
                t,
                reason="unconfirmed",
                partitions=tuple(sorted(ev.tp_str(*tp) for tp in leftover)),
                deadline_ms=min(g.pending[tp] for tp in leftover),
            )
        )
    if g.kind is not None:
        kind = g.display_kind
        ctx.flush(g.group_id)
        mark_dead(g, t)
        ctx.events.append(ev.GroupDeleted(g.group_id, p, o, t, kind=kind, reason="tombstone"))
    return None


def create_simple(g: Group, src: Src, ctx: FoldContext) -> None:
    """``getOrMaybeCreateClassicGroup(groupId, true)``: offsets without a group object."""
    ensure_kind(g, CLASSIC, src, ctx)
    g.state = EMPTY
    g.state_since_ms = src[2]


# ============================================================================================
# K=0 / K=1 offset commits


def apply_commit(g: Group, tp: TopicPartition, entry: OffsetEntry, src: Src, ctx: FoldContext) -> None:
    """Store one committed offset (shared by the per-record and the batch paths)."""
    if g.kind is None:
        create_simple(g, src, ctx)
    topic_id = entry[5]
    if topic_id is not None:
        g.topic_names[topic_id] = tp[0]
    if g.pending:
        g.pending.pop(tp, None)
    g.offsets[tp] = entry
    ctx.committed.add(tp)
    ctx.commit_topics.add(tp[0])
    ctx.last_src["commit"] = src


def apply_offset_tombstone(g: Group, tp: TopicPartition, src: Src, ctx: FoldContext) -> None:
    """An offset tombstone: a no-op for an offset already gone (confirming a mirror expiry if it
    was one); otherwise an expiry, an admin delete or a disagreement (state/expiry.py)."""
    if tp not in g.offsets:
        if g.pending.pop(tp, None) is not None:
            g.counters["expiries_confirmed"] += 1
        return
    verdict = classify_tombstone(g, tp[0], tp[1], src[2], ctx.config)
    del g.offsets[tp]
    if verdict == "expired":
        g.counters["offsets_expired"] += 1
        ctx.broker_expired.append(tp)
        ctx.last_src["expired"] = src
    elif verdict == "disagreement":
        g.counters["expiry_disagreements"] += 1
        p, o, t = src
        ctx.events.append(
            ev.ExpiryDisagreement(g.group_id, p, o, t, reason="early_tombstone", partitions=(ev.tp_str(*tp),))
        )
    else:
        g.counters["offsets_deleted"] += 1
        ctx.deleted.append(tp)
        ctx.last_src["deleted"] = src


def replay_offset_commit(g: Group, rec: Record[Any, Any], ctx: FoldContext) -> Group | None:
    """K=0 (legacy, 0.8.2) and K=1 -- ``OffsetMetadataManager.replay``."""
    key = rec.key
    tp = (key.topic, key.partition)
    src = _src(rec)
    v = rec.value
    if v is None:
        apply_offset_tombstone(g, tp, src, ctx)
        return g
    entry: OffsetEntry = (
        v.offset,
        v.leader_epoch,
        v.metadata,
        v.commit_timestamp_ms,
        v.expire_timestamp_ms,
        v.topic_id,
        src[0],
        src[1],
    )
    apply_commit(g, tp, entry, src, ctx)
    ctx.commits += 1
    g.counters["commits"] += 1
    return g


# ============================================================================================
# K=2 classic group metadata


def _sorted_assignment(parts: Iterable[Any]) -> Assignment:
    merged: dict[str, set[int]] = {}
    for tp in parts:
        merged.setdefault(tp.topic, set()).update(tp.partitions)
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(merged.items()))


def _classic_member(gm: GroupMember) -> Member:
    m = Member(gm.member_id)
    m.instance_id = gm.group_instance_id
    m.client_id = gm.client_id
    m.client_host = gm.client_host
    m.session_timeout_ms = gm.session_timeout_ms
    # ClassicGroupMember: a V0 record has no rebalance timeout; Kafka uses the session timeout.
    m.rebalance_timeout_ms = (
        gm.rebalance_timeout_ms if gm.rebalance_timeout_ms is not None else gm.session_timeout_ms
    )
    sub = gm.consumer_subscription
    if sub is not None:
        m.subscribed_topics = tuple(sorted(set(sub.topics)))
        m.rack_id = sub.rack_id
    if gm.subscription_error is not None:
        m.subscription_error = f"{gm.subscription_error.field}: {gm.subscription_error.reason}"
    asg: ConsumerAssignment | None = gm.consumer_assignment
    if asg is not None:
        m.assignment = _sorted_assignment(asg.assigned_partitions)
    if gm.assignment_error is not None:
        m.assignment_error = f"{gm.assignment_error.field}: {gm.assignment_error.reason}"
    return m


def replay_group_metadata(g: Group, rec: Record[Any, Any], ctx: FoldContext) -> Group | None:
    """K=2 -- ``GroupMetadataManager.replay(GroupMetadataKey, GroupMetadataValue)``: the record is the
    whole classic group (members empty -> Empty, else Stable); a tombstone removes the group."""
    src = _src(rec)
    p, o, t = src
    v = rec.value
    if v is None:
        if g.kind not in (CLASSIC, None):
            return g  # a leftover classic tombstone for a group already converted: nothing to do
        return drop_group(g, src, ctx)
    was_classic = g.kind == CLASSIC
    old_gen = g.generation if was_classic else None
    ensure_kind(g, CLASSIC, src, ctx)

    # --- members: diff the old set against the record's
    new_members = {gm.member_id: _classic_member(gm) for gm in v.members}
    old_members = g.members
    removed = [mid for mid in old_members if mid not in new_members]
    added = [mid for mid in new_members if mid not in old_members]
    by_instance_removed = {
        old_members[mid].instance_id: mid for mid in removed if old_members[mid].instance_id
    }
    for mid in sorted(removed):
        m = old_members[mid]
        if m.instance_id and any(new_members[a].instance_id == m.instance_id for a in added):
            continue  # replaced below
        g.members.pop(mid)
        if m.instance_id:
            g.recent_static_leaves = {k: x for k, x in g.recent_static_leaves.items() if x[1] == t}
            g.recent_static_leaves[m.instance_id] = (mid, t)
        g.counters["member_leaves"] += 1
        ctx.events.append(
            ev.MemberLeft(
                g.group_id, p, o, t, member_id=mid, instance_id=m.instance_id, client_id=m.client_id
            )
        )
    for mid in added:
        nm = new_members[mid]
        old_id = by_instance_removed.get(nm.instance_id) if nm.instance_id else None
        if old_id is not None:
            before = old_members[old_id].assignment
            del g.members[old_id]
            g.members[mid] = nm
            g.counters["member_replacements"] += 1
            ctx.events.append(
                ev.MemberReplaced(
                    g.group_id, p, o, t, instance_id=nm.instance_id or "", before=old_id, after=mid
                )
            )
            _assignment_event(g, mid, (before, nm.assignment), src, ctx)
        else:
            _add_member(g, nm, src, ctx)
            _assignment_event(g, mid, ((), nm.assignment), src, ctx)
    for mid, nm in new_members.items():
        if mid in old_members:
            _assignment_event(g, mid, (old_members[mid].assignment, nm.assignment), src, ctx)
    g.members = new_members  # record order (Kafka iterates its own map; order is not observable)

    # --- generation: a bump means a rebalance completed; gaps are failed rebalances
    gen = v.generation
    if gen > 0 and (old_gen is None or gen > old_gen):
        skipped = 0 if old_gen is None else gen - old_gen - 1
        g.counters["rebalances"] += 1
        g.counters["skipped_generations"] += skipped
        g.last_rebalance_ms = t
        ctx.events.append(
            ev.RebalanceCompleted(g.group_id, p, o, t, before=old_gen, after=gen, skipped=skipped)
        )
    elif old_gen is not None and gen < old_gen:
        g.counters["anomalies"] += 1
    g.generation = gen
    g.protocol_type = v.protocol_type
    g.current_state_timestamp_ms = v.current_state_timestamp_ms

    # --- leader and selected protocol (only the selected one is logged: no votes for K=2)
    g.leader = v.leader
    if v.leader is not None and v.leader != g.last_leader:
        if g.last_leader is not None:
            g.counters["leader_changes"] += 1
            ctx.events.append(ev.LeaderChanged(g.group_id, p, o, t, before=g.last_leader, after=v.leader))
        g.last_leader = v.leader
    g.protocol = v.protocol
    if v.protocol is not None and v.protocol != g.last_protocol:
        if g.last_protocol is not None:
            ctx.events.append(
                ev.ProtocolChanged(g.group_id, p, o, t, before=g.last_protocol, after=v.protocol)
            )
        g.last_protocol = v.protocol

    since = v.current_state_timestamp_ms if v.current_state_timestamp_ms is not None else t
    new_state = STABLE if v.members else EMPTY
    if new_state != g.state:
        set_state(g, new_state, since, src, ctx)
    elif gen != old_gen:
        g.state_since_ms = since  # a new generation re-entered the state
    return g


# ============================================================================================
# KIP-848 consumer groups (K=3..8, 16), share groups (K=9..15), streams groups (K=17, 19..23)


def _derive_modern_state(g: Group, src: Src, ctx: FoldContext) -> None:
    """``ConsumerGroup`` / ``ShareGroup`` / ``StreamsGroup.maybeUpdateGroupState``."""
    if g.kind == SHARE:
        state = STABLE if g.members else EMPTY
    elif not g.members:
        state = EMPTY
    else:
        target = g.assignment_epoch if g.assignment_epoch is not None else 0
        group_epoch = g.group_epoch if g.group_epoch is not None else 0
        stable_code = STREAMS_MEMBER_STABLE if g.kind == STREAMS else CONSUMER_MEMBER_STABLE
        if g.kind == STREAMS and (
            g.topology_epoch is None
            or g.topology_epoch
            != (g.validated_topology_epoch if g.validated_topology_epoch is not None else -1)
        ):
            state = NOT_READY
        elif group_epoch > target:
            state = ASSIGNING
        elif any(m.member_state != stable_code or m.member_epoch != target for m in g.members.values()):
            state = RECONCILING  # ModernGroupMember.isReconciledTo: STABLE and at the target epoch
        else:
            state = STABLE
    set_state(g, state, src[2], src, ctx)


def _update_assignor(g: Group, src: Src, ctx: FoldContext) -> None:
    if g.kind != CONSUMER:
        return
    assignor = preferred_server_assignor(g.members.values())
    if assignor is not None and assignor != g.last_protocol:
        if g.last_protocol is not None:
            p, o, t = src
            ctx.events.append(ev.ProtocolChanged(g.group_id, p, o, t, before=g.last_protocol, after=assignor))
        g.last_protocol = assignor
    g.protocol = assignor


def _new_modern_member(kind: str, member_id: str) -> Member:
    m = Member(member_id)
    # ConsumerGroupMember.Builder defaults (as read): epoch 0, previous epoch 0, state STABLE;
    # streams members have no state until their first K=22.
    m.member_epoch = 0
    m.previous_member_epoch = 0
    m.member_state = None if kind == STREAMS else CONSUMER_MEMBER_STABLE
    return m


def _get_or_add_member(g: Group, member_id: str, src: Src, ctx: FoldContext) -> tuple[Member, bool]:
    m = g.members.get(member_id)
    if m is not None:
        return m, False
    assert g.kind is not None
    return _new_modern_member(g.kind, member_id), True


def _id_assignment(parts: Sequence[TopicIdPartitions]) -> Assignment:
    merged: dict[str, set[int]] = {}
    for tp in parts:
        merged.setdefault(tp.topic_id or "", set()).update(tp.partitions)
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(merged.items()))


def _task_assignment(tasks: Sequence[TaskIds]) -> Assignment:
    merged: dict[str, set[int]] = {}
    for task in tasks:
        merged.setdefault(task.subtopology_id, set()).update(task.partitions)
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(merged.items()))


def _group_metadata(kind: str) -> Callable[[Group, Record[Any, Any], FoldContext], Group | None]:
    def replay(g: Group, rec: Record[Any, Any], ctx: FoldContext) -> Group | None:
        src = _src(rec)
        v = rec.value
        if v is None:
            if g.kind != kind:
                return g  # "If the group does not exist, we can ignore the tombstone."
            if g.members:
                g.counters["anomalies"] += 1  # Kafka: IllegalStateException (members left)
            return drop_group(g, src, ctx)
        ensure_kind(g, kind, src, ctx)
        g.group_epoch = v.epoch
        g.metadata_hash = v.metadata_hash
        if kind == STREAMS:
            g.validated_topology_epoch = v.validated_topology_epoch
        _derive_modern_state(g, src, ctx)
        return g

    replay.__name__ = f"replay_{kind}_group_metadata"
    replay.__doc__ = f"K=3/11/17 for {kind} groups: the group epoch (a tombstone deletes the group)."
    return replay


def _target_metadata(kind: str) -> Callable[[Group, Record[Any, Any], FoldContext], Group | None]:
    def replay(g: Group, rec: Record[Any, Any], ctx: FoldContext) -> Group | None:
        src = _src(rec)
        p, o, t = src
        v = rec.value
        if v is None:
            if g.kind == kind:
                g.assignment_epoch = -1
                _derive_modern_state(g, src, ctx)
            return g
        ensure_kind(g, kind, src, ctx)
        old = g.assignment_epoch
        new = v.assignment_epoch
        if old is None or old < 0 or new > old:
            skipped = 0 if old is None or old < 0 else max(0, new - old - 1)
            g.counters["rebalances"] += 1
            g.counters["skipped_generations"] += skipped
            g.last_rebalance_ms = t
            ctx.events.append(
                ev.RebalanceCompleted(
                    g.group_id,
                    p,
                    o,
                    t,
                    before=None if old is None or old < 0 else old,
                    after=new,
                    skipped=skipped,
                )
            )
        g.assignment_epoch = new
        _derive_modern_state(g, src, ctx)
        return g

    replay.__name__ = f"replay_{kind}_target_assignment_metadata"
    replay.__doc__ = f"K=6/12/20 for {kind} groups: the target assignment epoch (a bump = rebalance done)."
    return replay


def _target_member(kind: str) -> Callable[[Group, Record[Any, Any], FoldContext], Group | None]:
    def replay(g: Group, rec: Record[Any, Any], ctx: FoldContext) -> Group | None:
        mid = rec.key.member_id
        v = rec.value
        if v is None:
            if g.kind == kind:
                g.targets.pop(mid, None)
            return g
        ensure_kind(g, kind, _src(rec), ctx)
        if kind == STREAMS:
            g.targets[mid] = _task_assignment(v.active_tasks)
        else:
            g.targets[mid] = _id_assignment(v.topic_partitions)
        return g

    replay.__name__ = f"replay_{kind}_target_assignment_member"
    replay.__doc__ = f"K=7/13/21 for {kind} groups: one member's target assignment."
    return replay


def _member_tombstone(g: Group, kind: str, mid: str, src: Src, ctx: FoldContext) -> Group:
    if g.kind != kind or mid not in g.members:
        return g
    _remove_member(g, mid, src, ctx)
    _derive_modern_state(g, src, ctx)
    _update_assignor(g, src, ctx)
    return g


def _upsert_member(
    g: Group, kind: str, rec: Record[Any, Any], src: Src, ctx: FoldContext
) -> tuple[Member, bool]:
    """K=5/10/19 with a value: the member (added if new) with its client identity from the record."""
    v = rec.value
    assert v is not None  # tombstones are _member_tombstone's
    ensure_kind(g, kind, src, ctx)
    m, new = _get_or_add_member(g, rec.key.member_id, src, ctx)
    if kind != SHARE:  # share members have no static membership
        m.instance_id = v.instance_id
    m.rack_id = v.rack_id
    m.client_id = v.client_id
    m.client_host = v.client_host
    return m, new


def replay_consumer_member_metadata(g: Group, rec: Record[Any, Any], ctx: FoldContext) -> Group | None:
    """K=5: a KIP-848 member's subscription and client data (a tombstone removes the member)."""
    src = _src(rec)
    v = rec.value
    if v is None:
        return _member_tombstone(g, CONSUMER, rec.key.member_id, src, ctx)
    m, new = _upsert_member(g, CONSUMER, rec, src, ctx)
    m.subscribed_topics = tuple(sorted(set(v.subscribed_topic_names)))
    m.subscribed_regex = v.subscribed_topic_regex or None
    m.rebalance_timeout_ms = v.rebalance_timeout_ms
    m.server_assignor = v.server_assignor
    cmm = v.classic_member_metadata
    if cmm is not None:
        m.session_timeout_ms = cmm.session_timeout_ms
        m.protocols = tuple(pr.name for pr in cmm.supported_protocols)
    else:
        m.protocols = None
    if new:
        _add_member(g, m, src, ctx)
    _derive_modern_state(g, src, ctx)
    _update_assignor(g, src, ctx)
    return g


def _current_assignment(kind: str) -> Callable[[Group, Record[Any, Any], FoldContext], Group | None]:
    def replay(g: Group, rec: Record[Any, Any], ctx: FoldContext) -> Group | None:
        src = _src(rec)
        mid = rec.key.member_id
        v = rec.value
        if v is None:
            m = g.members.get(mid) if g.kind == kind else None
            if m is None:
                return g  # "If the member does not exist, we can ignore the tombstone."
            before = m.assignment
            m.member_epoch = LEAVE_GROUP_MEMBER_EPOCH
            m.previous_member_epoch = LEAVE_GROUP_MEMBER_EPOCH
            m.assignment = ()
            m.pending_revocation = ()
            _assignment_event(g, mid, (before, ()), src, ctx)
            _derive_modern_state(g, src, ctx)
            return g
        ensure_kind(g, kind, src, ctx)
        m, new = _get_or_add_member(g, mid, src, ctx)
        before = m.assignment
        m.member_epoch = v.member_epoch
        m.previous_member_epoch = v.previous_member_epoch
        m.member_state = v.state
        if kind == STREAMS:
            m.assignment = _task_assignment(v.active_tasks)
            extra = dict(m.extra or {})
            extra["standby_tasks"] = [[s, list(ps)] for s, ps in _task_assignment(v.standby_tasks)]
            extra["warmup_tasks"] = [[s, list(ps)] for s, ps in _task_assignment(v.warmup_tasks)]
            m.extra = extra
            m.pending_revocation = _task_assignment(v.active_tasks_pending_revocation)
        else:
            m.assignment = _id_assignment(v.assigned_partitions)
            if kind == CONSUMER:
                m.pending_revocation = _id_assignment(v.partitions_pending_revocation)
        if new:
            _add_member(g, m, src, ctx)
        _assignment_event(g, mid, (before, m.assignment), src, ctx)
        _derive_modern_state(g, src, ctx)
        return g

    replay.__name__ = f"replay_{kind}_current_member_assignment"
    replay.__doc__ = f"K=8/14/22 for {kind} groups: a member's epochs, state and current assignment."
    return replay


def replay_consumer_partition_metadata(g: Group, rec: Record[Any, Any], ctx: FoldContext) -> Group | None:
    """K=4 (written up to 4.0; 4.1+ writes only tombstones): subscribed topics' metadata -- here a
    source of TopicId -> name."""
    v = rec.value
    if v is None:
        return g
    ensure_kind(g, CONSUMER, _src(rec), ctx)  # getOrMaybeCreatePersistedConsumerGroup(value != null)
    for tm in v.topics:
        if tm.topic_id:
            g.topic_names[tm.topic_id] = tm.topic_name
    return g


def replay_consumer_regex(g: Group, rec: Record[Any, Any], ctx: FoldContext) -> Group | None:
    """K=16 (4.0+): topics a broker-side regex resolved to; ignored if the group does not exist."""
    if g.kind != CONSUMER:
        return g
    regex = rec.key.regular_expression
    v = rec.value
    if v is None:
        g.regexes.pop(regex, None)
    else:
        g.regexes[regex] = tuple(sorted(set(v.topics)))
    return g


def replay_share_member_metadata(g: Group, rec: Record[Any, Any], ctx: FoldContext) -> Group | None:
    """K=10: a share group member (a tombstone removes it)."""
    src = _src(rec)
    v = rec.value
    if v is None:
        return _member_tombstone(g, SHARE, rec.key.member_id, src, ctx)
    m, new = _upsert_member(g, SHARE, rec, src, ctx)
    m.subscribed_topics = tuple(sorted(set(v.subscribed_topic_names)))
    if new:
        _add_member(g, m, src, ctx)
    _derive_modern_state(g, src, ctx)
    return g


def replay_share_partition_metadata(g: Group, rec: Record[Any, Any], ctx: FoldContext) -> Group | None:
    """K=9 (3.9/4.0 only) and K=15: share-partition state metadata -- topic names, and K=15's
    initializing/initialized/deleting topics."""
    v = rec.value
    if v is None:
        if rec.record_type == 15 and g.kind == SHARE:
            g.share_topics = None
        return g
    for attr in ("topics", "initialized_topics", "deleting_topics", "initializing_topics"):
        for info in getattr(v, attr, None) or ():
            if info.topic_id:
                g.topic_names[info.topic_id] = info.topic_name
    if rec.record_type == 15 and g.kind == SHARE:
        g.share_topics = {
            "initializing": sorted(i.topic_name for i in v.initializing_topics or ()),
            "initialized": sorted(i.topic_name for i in v.initialized_topics),
            "deleting": sorted(i.topic_name for i in v.deleting_topics),
        }
    return g


def replay_streams_member_metadata(g: Group, rec: Record[Any, Any], ctx: FoldContext) -> Group | None:
    """K=19: a streams group member (a tombstone removes it)."""
    src = _src(rec)
    v = rec.value
    if v is None:
        return _member_tombstone(g, STREAMS, rec.key.member_id, src, ctx)
    m, new = _upsert_member(g, STREAMS, rec, src, ctx)
    m.rebalance_timeout_ms = v.rebalance_timeout_ms
    extra = dict(m.extra or {})
    extra["topology_epoch"] = v.topology_epoch
    extra["process_id"] = v.process_id
    extra["user_endpoint"] = (
        None if v.user_endpoint is None else f"{v.user_endpoint.host}:{v.user_endpoint.port}"
    )
    extra["client_tags"] = {kv.key: kv.value for kv in v.client_tags}
    m.extra = extra
    if new:
        _add_member(g, m, src, ctx)
    _derive_modern_state(g, src, ctx)
    return g


def replay_streams_topology(g: Group, rec: Record[Any, Any], ctx: FoldContext) -> Group | None:
    """K=23: the topology; its source and repartition-source topics protect offsets from expiry
    (``StreamsTopology.sourceTopicMap``)."""
    src = _src(rec)
    v = rec.value
    if v is None:
        if g.kind == STREAMS:
            g.topology = None
            g.topology_epoch = None
            _derive_modern_state(g, src, ctx)
        return g
    ensure_kind(g, STREAMS, src, ctx)
    sources: set[str] = set()
    for st in v.subtopologies:
        sources.update(st.source_topics)
        sources.update(t.name for t in st.repartition_source_topics)
    g.topology = {
        "source_topics": sorted(sources),
        "subtopologies": [st.subtopology_id for st in v.subtopologies],
    }
    g.topology_epoch = v.epoch
    _derive_modern_state(g, src, ctx)
    return g


# ============================================================================================
# The dispatch table

ReplayFn = Callable[[Group, Record[Any, Any], FoldContext], "Group | None"]

DISPATCH: Final[dict[int, ReplayFn]] = {
    0: replay_offset_commit,
    1: replay_offset_commit,
    2: replay_group_metadata,
    3: _group_metadata(CONSUMER),
    4: replay_consumer_partition_metadata,
    5: replay_consumer_member_metadata,
    6: _target_metadata(CONSUMER),
    7: _target_member(CONSUMER),
    8: _current_assignment(CONSUMER),
    9: replay_share_partition_metadata,
    10: replay_share_member_metadata,
    11: _group_metadata(SHARE),
    12: _target_metadata(SHARE),
    13: _target_member(SHARE),
    14: _current_assignment(SHARE),
    15: replay_share_partition_metadata,
    16: replay_consumer_regex,
    17: _group_metadata(STREAMS),
    19: replay_streams_member_metadata,
    20: _target_metadata(STREAMS),
    21: _target_member(STREAMS),
    22: _current_assignment(STREAMS),
    23: replay_streams_topology,
}


# ============================================================================================
# Folding


def skipped_entry(rec: UnknownRecord | DecodeError) -> dict[str, Any]:
    s = rec.source
    if isinstance(rec, UnknownRecord):
        return {
            "kind": "unknown",
            "partition": s.partition,
            "offset": s.offset,
            "record_type": rec.record_type,
        }
    return {
        "kind": "error",
        "partition": s.partition,
        "offset": s.offset,
        "record_type": rec.record_type,
        "field": rec.field,
        "reason": rec.reason,
    }


def is_applied(g: Group | None, pos: Position) -> bool:
    """Whether a record at ``pos`` is at or before what the group already applied."""
    return g is not None and g.last_position is not None and pos <= g.last_position


def apply_record(
    g: Group | None,
    rec: Record[Any, Any] | UnknownRecord | DecodeError,
    ctx: FoldContext,
    group_id: str | None,
) -> Group | None:
    """Apply one decoded record (any kind) to the group; the heart of `fold` and the batch path."""
    src = _src(rec)
    pos = (src[0], src[1])
    if is_applied(g, pos):
        return g
    if g is None:
        gid = group_id
        if isinstance(rec, Record) or (isinstance(rec, DecodeError) and rec.key is not None):
            gid = rec.key.group_id
        g = Group(gid if gid is not None else "")
    if g.pending:
        check_pending(g, src[2], ctx.config, ctx.events, (src[0], src[1]))
    if isinstance(rec, Record):
        fn = DISPATCH.get(rec.record_type)
        if fn is None:
            g.counters["unknown_records"] += 1
            entry = {"kind": "unknown", "partition": src[0], "offset": src[1], "record_type": rec.record_type}
            g.keep_error(entry)
            ctx.skipped.append(entry)
            out: Group | None = g
        else:
            out = fn(g, rec, ctx)
    else:
        entry = skipped_entry(rec)
        g.counters["unknown_records" if isinstance(rec, UnknownRecord) else "decode_errors"] += 1
        g.keep_error(entry)
        ctx.skipped.append(entry)
        out = g
    if out is not None:
        if out.kind is None and not out.offsets and not out.pending:
            return None  # nothing for this id (e.g. a tombstone of something never seen)
        out.counters["records"] += 1
        out.last_position = pos
        out.last_change_ms = src[2]
    return out


def finish(g: Group | None, ctx: FoldContext) -> FoldResult:
    if g is not None:
        ctx.flush(g.group_id)
        if not g.exists and not g.offsets and not g.pending:
            g = None
    return FoldResult(g, ctx.events, ctx.skipped)


def fold(
    group: Group | None,
    records: Iterable[Record[Any, Any] | UnknownRecord | DecodeError],
    *,
    group_id: str | None = None,
    config: OffsetConfig = DEFAULT_CONFIG,
) -> FoldResult:
    """Fold records (one group's, in log order) into ``group`` (``None`` = no state yet).

    Mutates and returns ``group`` (or a new `Group`, or ``None``); pure in the sense that the same
    state and records always give the same result.  ``group_id`` names the group when ``group`` is
    None and the first record carries no decodable key (unknown types)."""
    ctx = FoldContext(config)
    g = group
    for rec in records:
        g = apply_record(g, rec, ctx, group_id)
    return finish(g, ctx)


def replay(
    group: Group | None,
    record: Record[Any, Any] | UnknownRecord | DecodeError,
    *,
    config: OffsetConfig = DEFAULT_CONFIG,
) -> FoldResult:
    """One record (the per-record API; `fold` of a one-element list)."""
    return fold(group, (record,), config=config)


__all__ = ["DEAD", "DISPATCH", "FoldContext", "FoldResult", "apply_record", "finish", "fold", "replay"]
