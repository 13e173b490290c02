"""The fold's shared machinery: the per-fold context and result, a record's source coordinates, and
the group and member helpers every record family uses (creation and kind changes, state, members,
group deletion).

* **Offsets outlive their group object.**  A group tombstone (K=2, K=3, K=11, K=17) removes the
  *group* (`drop_group`); offsets are removed only by their own tombstones.  If offsets remain, the
  id lives on as the coordinator's "simple" classic group -- what ``OffsetMetadataManager.replay``
  creates (``getOrMaybeCreateClassicGroup(groupId, true)``) for offsets without a group, and exactly
  the 4.x classic->consumer conversion: a K=2 tombstone followed by K=3..8 records, offsets kept
  (``GroupMetadataManager``: ``classicGroup.createGroupTombstoneRecords`` then
  ``consumerGroup.createConsumerGroupRecords``).  A modern record then takes the simple group over
  (`ensure_kind`; ``getOrMaybeCreatePersistedConsumerGroup`` replaces a simple classic group).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from decoders.records import DecodeError, Record, UnknownRecord
from state import events as ev
from state.config import OffsetConfig
from state.expiry import GROUP_TOMBSTONE, GROUP_TOMBSTONE_OVERDUE, awaits_group_tombstone, mark_dead
from state.model import CLASSIC, CONSUMER, DEAD, EMPTY, SHARE, Assignment, Group, Member, TopicPartition


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


def src_of(rec: Record[Any, Any] | UnknownRecord | DecodeError) -> Src:
    s = rec.source
    return (s.partition, s.offset, s.timestamp_ms)


# ============================================================================================
# Shared helpers: existence, kind, state, members


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
        remove_member(g, mid, src, ctx)
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


def assignment_event(
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


def add_member(g: Group, m: Member, src: Src, ctx: FoldContext) -> None:
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


def remove_member(g: Group, member_id: str, src: Src, ctx: FoldContext) -> None:
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
    # the mirror found the group deletable (Rule 8) and waited for the broker's sweep: its
    # tombstone confirms the expiry (a DeleteGroups of the same Empty group writes the same bytes)
    expired = awaits_group_tombstone(g)
    if GROUP_TOMBSTONE in g.pending:
        g.counters["expiries_confirmed"] += 1
    g.pending.pop(GROUP_TOMBSTONE, None)
    g.pending.pop(GROUP_TOMBSTONE_OVERDUE, None)
    if g.kind is not None:
        for mid in sorted(g.members):
            remove_member(g, mid, src, ctx)
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
    leftover = list(g.pending)
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
        reason = "expired" if expired else "tombstone"
        ctx.events.append(ev.GroupDeleted(g.group_id, p, o, t, kind=kind, reason=reason))
    return None
