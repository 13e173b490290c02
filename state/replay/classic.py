"""Classic groups: K=2 (``GroupMetadataManager.replay(GroupMetadataKey, GroupMetadataValue)``), where
each record is the whole group, diffed against the mirror's into member, rebalance, leader and
protocol events.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from decoders.records import ConsumerAssignment, GroupMember, Record
from state import events as ev
from state.model import CLASSIC, EMPTY, STABLE, Assignment, Group, Member
from state.replay.context import (
    FoldContext,
    Src,
    add_member,
    assignment_event,
    drop_group,
    ensure_kind,
    set_state,
    src_of,
)


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
    src = src_of(rec)
    t = src[2]
    v = rec.value
    if v is None:
        if g.kind not in (CLASSIC, None):
            return g  # a leftover classic tombstone for a group already converted: nothing to do
        return drop_group(g, src, ctx)
    was_classic = g.kind == CLASSIC
    old_gen = g.generation if was_classic else None
    ensure_kind(g, CLASSIC, src, ctx)
    _replay_members(g, {gm.member_id: _classic_member(gm) for gm in v.members}, src, ctx)
    gen = v.generation
    _replay_generation(g, old_gen, gen, src, ctx)
    g.generation = gen
    g.protocol_type = v.protocol_type
    g.current_state_timestamp_ms = v.current_state_timestamp_ms
    _replay_leader_and_protocol(g, v.leader, v.protocol, src, ctx)

    since = v.current_state_timestamp_ms if v.current_state_timestamp_ms is not None else t
    new_state = STABLE if v.members else EMPTY
    if new_state != g.state:
        set_state(g, new_state, since, src, ctx)
    elif gen != old_gen:
        g.state_since_ms = since  # a new generation re-entered the state
    return g


def _replay_members(g: Group, new_members: dict[str, Member], src: Src, ctx: FoldContext) -> None:
    """Diff the group's members against the record's: left, joined, or -- a static member's new
    member id with the same instance id -- replaced; then their assignment changes."""
    p, o, t = src
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
            assignment_event(g, mid, (before, nm.assignment), src, ctx)
        else:
            add_member(g, nm, src, ctx)
            assignment_event(g, mid, ((), nm.assignment), src, ctx)
    for mid, nm in new_members.items():
        if mid in old_members:
            assignment_event(g, mid, (old_members[mid].assignment, nm.assignment), src, ctx)
    g.members = new_members  # record order (Kafka iterates its own map; order is not observable)


def _replay_generation(g: Group, old_gen: int | None, gen: int, src: Src, ctx: FoldContext) -> None:
    """A generation bump means a rebalance completed; gaps are failed rebalances."""
    p, o, t = src
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


def _replay_leader_and_protocol(
    g: Group, leader: str | None, protocol: str | None, src: Src, ctx: FoldContext
) -> None:
    """The leader and the selected protocol (only the selected one is logged: no votes for K=2)."""
    p, o, t = src
    g.leader = leader
    if leader is not None and leader != g.last_leader:
        if g.last_leader is not None:
            g.counters["leader_changes"] += 1
            ctx.events.append(ev.LeaderChanged(g.group_id, p, o, t, before=g.last_leader, after=leader))
        g.last_leader = leader
    g.protocol = protocol
    if protocol is not None and protocol != g.last_protocol:
        if g.last_protocol is not None:
            ctx.events.append(ev.ProtocolChanged(g.group_id, p, o, t, before=g.last_protocol, after=protocol))
        g.last_protocol = protocol
