"""Modern groups: the KIP-848 consumer (K=3..8, 16), share (K=9..15) and streams (K=17, 19..23) group
records of ``GroupMetadataManager.replay``, one factory per record shape shared by the three kinds.

* **KIP-848 member lifecycle**: K=5 or K=8 creates a member, only a K=5 tombstone removes it; a K=8
  tombstone sets its epochs to -2 (``ConsumerGroupMember.Builder``); group state is derived from
  epochs after every record (``ConsumerGroup.maybeUpdateGroupState``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from decoders.records import Record, TaskIds, TopicIdPartitions
from state import causes
from state import events as ev
from state.model import (
    ASSIGNING,
    CONSUMER,
    CONSUMER_MEMBER_STABLE,
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
)
from state.replay.context import (
    FoldContext,
    Src,
    add_member,
    assignment_event,
    drop_group,
    ensure_kind,
    remove_member,
    set_state,
    src_of,
)
from state.votes import preferred_server_assignor


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
        src = src_of(rec)
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
        src = src_of(rec)
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
            # issue 38: a bump without a rebalance (a static member's rejoin, share-partitions
            # initialised) is counted apart (`state.causes`); a first epoch is a rebalance
            why = causes.REBALANCE if old is None or old < 0 else causes.cause(g.bump_flags)
            g.bump_flags = 0
            if why == causes.REBALANCE:
                g.counters["rebalances"] += 1
                g.last_rebalance_ms = t
            else:
                g.counters[causes.COUNTER[why]] += 1
            g.counters["skipped_generations"] += skipped
            ctx.events.append(
                ev.RebalanceCompleted(
                    g.group_id,
                    p,
                    o,
                    t,
                    before=None if old is None or old < 0 else old,
                    after=new,
                    skipped=skipped,
                    cause=why,
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
        ensure_kind(g, kind, src_of(rec), ctx)
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
    remove_member(g, mid, src, ctx)
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
    src = src_of(rec)
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
        add_member(g, m, src, ctx)
    _derive_modern_state(g, src, ctx)
    _update_assignor(g, src, ctx)
    return g


def _current_assignment(kind: str) -> Callable[[Group, Record[Any, Any], FoldContext], Group | None]:
    def replay(g: Group, rec: Record[Any, Any], ctx: FoldContext) -> Group | None:
        src = src_of(rec)
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
            assignment_event(g, mid, (before, ()), src, ctx)
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
            add_member(g, m, src, ctx)
        assignment_event(g, mid, (before, m.assignment), src, ctx)
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
    ensure_kind(g, CONSUMER, src_of(rec), ctx)  # getOrMaybeCreatePersistedConsumerGroup(value != null)
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
    src = src_of(rec)
    v = rec.value
    if v is None:
        return _member_tombstone(g, SHARE, rec.key.member_id, src, ctx)
    m, new = _upsert_member(g, SHARE, rec, src, ctx)
    m.subscribed_topics = tuple(sorted(set(v.subscribed_topic_names)))
    if new:
        add_member(g, m, src, ctx)
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
    src = src_of(rec)
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
        add_member(g, m, src, ctx)
    _derive_modern_state(g, src, ctx)
    return g


def replay_streams_topology(g: Group, rec: Record[Any, Any], ctx: FoldContext) -> Group | None:
    """K=23: the topology; its source and repartition-source topics protect offsets from expiry
    (``StreamsTopology.sourceTopicMap``)."""
    src = src_of(rec)
    v = rec.value
    if v is None:
        if g.kind == STREAMS:
            g.topology = None
            g.topology_epoch = None
            _derive_modern_state(g, src, ctx)
        return g
    ensure_kind(g, STREAMS, src, ctx)
    sources: set[str] = set()
    #: a task is (subtopology id, partition): the topics whose partition it reads
    by_subtopology: dict[str, list[str]] = {}
    for st in v.subtopologies:
        read = {*st.source_topics, *(t.name for t in st.repartition_source_topics)}
        sources |= read
        by_subtopology[st.subtopology_id] = sorted(read)
    g.topology = {
        "source_topics": sorted(sources),
        "subtopologies": [st.subtopology_id for st in v.subtopologies],
        "source_topics_of": by_subtopology,
    }
    g.topology_epoch = v.epoch
    _derive_modern_state(g, src, ctx)
    return g


# The records K=3/11/17, 6/12/20, 7/13/21 and 8/14/22 have one shape across the three kinds: one
# function per kind from each factory above (named as the function's own ``__name__``).
replay_consumer_group_metadata = _group_metadata(CONSUMER)
replay_share_group_metadata = _group_metadata(SHARE)
replay_streams_group_metadata = _group_metadata(STREAMS)
replay_consumer_target_assignment_metadata = _target_metadata(CONSUMER)
replay_share_target_assignment_metadata = _target_metadata(SHARE)
replay_streams_target_assignment_metadata = _target_metadata(STREAMS)
replay_consumer_target_assignment_member = _target_member(CONSUMER)
replay_share_target_assignment_member = _target_member(SHARE)
replay_streams_target_assignment_member = _target_member(STREAMS)
replay_consumer_current_member_assignment = _current_assignment(CONSUMER)
replay_share_current_member_assignment = _current_assignment(SHARE)
replay_streams_current_member_assignment = _current_assignment(STREAMS)
