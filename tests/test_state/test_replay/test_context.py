"""The fold's shared machinery (`state.replay.context`): offsets outliving their group object as a
simple group, the ``emptied`` counter, and the helpers every record family uses."""

from __future__ import annotations

from lab.records import MIN, T0, Log, cm, tip
from state import events as ev
from state.config import OffsetConfig
from state.expiry import GROUP_TOMBSTONE
from state.model import CLASSIC, CONSUMER, DEAD, EMPTY, SIMPLE, Group, Member
from state.replay import fold
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
from tests.support.replay import of, types


def test_offsets_survive_group_tombstone_as_simple_group() -> None:
    log = Log()
    log.classic("g", 1, [cm("a")])
    log.commit("g", "t", 0, 5)
    log.classic("g", 2, [])
    log.classic_tombstone("g")
    res = fold(None, log.records)
    g = res.group
    assert g is not None and g.display_kind == SIMPLE and g.state == "Empty" and g.offsets
    assert g.generation is None and g.protocol_type is None


def test_emptied_counts_each_time_the_last_member_left() -> None:
    """Flapping Empty <-> Stable is a counter, so no transition is lost between two scrapes."""
    log = Log()
    log.new_empty_group("g")  # created Empty: not an emptying
    for gen in range(1, 7, 2):
        log.tick(MIN).classic("g", gen, [cm("a")])
        log.tick(MIN).classic("g", gen + 1, [])
    g = fold(None, log.records).group
    assert g is not None and g.state == "Empty" and g.counters["emptied"] == 3
    log2 = Log()
    log2.k848_stable_group("k", {"m1": (["t"], [tip("T", 0)])})
    log2.k848_leave("k", "m1")
    g2 = fold(None, log2.records).group
    assert g2 is not None and g2.state == "Empty" and g2.counters["emptied"] == 1


# ---------------------------------------------------------------------- the helpers, called directly
def static(member_id: str, instance_id: str) -> Member:
    m = Member(member_id)
    m.instance_id = instance_id
    return m


S1: Src = (3, 100, T0)
S2: Src = (3, 101, T0 + 5)


def test_flush_emits_one_aggregate_per_kind_at_its_last_records_position() -> None:
    ctx = FoldContext(OffsetConfig())
    ctx.commits = 3
    ctx.committed = {("t", 0), ("t", 1)}
    ctx.commit_topics = {"t", "a"}
    ctx.last_src["commit"] = S2
    ctx.broker_expired = [("t", 0)]
    ctx.last_src["expired"] = S1
    ctx.deleted = [("u", 2), ("u", 3)]
    ctx.last_src["deleted"] = S2
    ctx.flush("g")
    committed, expired, deleted = ctx.events
    assert isinstance(committed, ev.OffsetsCommitted)
    assert (committed.count, committed.partitions, committed.topics) == (3, 2, ("a", "t"))
    assert (committed.source_partition, committed.source_offset) == (3, 101)
    assert isinstance(expired, ev.OffsetsExpired)
    assert (expired.origin, expired.partitions, expired.at_ms) == ("broker", ("t:0",), T0)
    assert expired.source_offset == 100
    assert isinstance(deleted, ev.OffsetsDeleted) and deleted.partitions == ("u:2", "u:3")
    ctx.flush("g")  # nothing left to say
    assert len(ctx.events) == 3


def test_ensure_kind_creates_then_converts_and_counts_a_conversion_kafka_would_refuse() -> None:
    ctx = FoldContext(OffsetConfig())
    g = Group("g")
    ensure_kind(g, CLASSIC, S1, ctx)
    assert (g.kind, g.state, g.created_ms) == (CLASSIC, EMPTY, T0)
    assert types(ctx.events) == ["group_created"]
    ensure_kind(g, CLASSIC, S2, ctx)  # already one: nothing
    assert len(ctx.events) == 1
    # a classic group with a protocol type is not "simple": Kafka's replay would throw; the log was
    # written by a coordinator that converted it, so the mirror follows and counts an anomaly
    g.protocol_type = "consumer"
    add_member(g, Member("m1"), S1, ctx)
    ensure_kind(g, CONSUMER, S2, ctx)
    assert g.kind == CONSUMER and g.members == {} and g.counters["anomalies"] == 1
    assert types(ctx.events)[-2:] == ["member_left", "kind_changed"]
    (changed,) = of(ctx.events, ev.KindChanged)
    assert (changed.before, changed.after) == (CLASSIC, CONSUMER)


def test_set_state_counts_emptied_except_when_the_group_is_born() -> None:
    ctx = FoldContext(OffsetConfig())
    g = Group("g")
    g.state = DEAD
    set_state(g, EMPTY, T0, S1, ctx)  # created Empty: not an emptying
    set_state(g, "Stable", T0, S1, ctx)
    set_state(g, EMPTY, T0 + 5, S2, ctx)
    set_state(g, EMPTY, T0 + 9, S2, ctx)  # no change: no event, no count
    assert g.counters["emptied"] == 1 and g.state_since_ms == T0 + 5
    assert [(e.before, e.after) for e in of(ctx.events, ev.StateChanged)] == [
        (DEAD, EMPTY),
        (EMPTY, "Stable"),
        ("Stable", EMPTY),
    ]


def test_a_static_member_leaving_and_joining_in_one_write_is_a_replacement() -> None:
    """KIP-345 through KIP-848: "old member leaves, new joins" as two records of one coordinator
    write (the same record time) is one MemberReplaced, not a leave and a join."""
    ctx = FoldContext(OffsetConfig())
    g = Group("g")
    g.kind = CONSUMER
    add_member(g, static("m1", "i1"), S1, ctx)
    remove_member(g, "m1", S2, ctx)
    add_member(g, static("m2", "i1"), S2, ctx)
    assert types(ctx.events) == ["member_joined", "member_left", "member_replaced"]
    assert g.counters["member_replacements"] == 1 and g.counters["member_joins"] == 1
    # a rejoin at a later time is a leave then a join
    remove_member(g, "m2", S2, ctx)
    add_member(g, static("m3", "i1"), (3, 102, T0 + 60_000), ctx)
    assert types(ctx.events)[-2:] == ["member_left", "member_joined"]
    remove_member(g, "never-there", S2, ctx)  # nothing to say
    assert len(ctx.events) == 5


def test_an_assignment_event_names_partitions_by_topic_name_when_known() -> None:
    ctx = FoldContext(OffsetConfig())
    g = Group("g")
    g.kind = CONSUMER
    g.topic_names = {"OID": "orders"}
    assignment_event(g, "m1", ((("OID", (0, 1)),), (("OID", (1, 2)), ("XID", (0,)))), S1, ctx)
    assignment_event(g, "m1", ((("OID", (0,)),), (("OID", (0,)),)), S1, ctx)  # unchanged
    (changed,) = of(ctx.events, ev.AssignmentChanged)
    assert (changed.added, changed.removed) == (("XID:0", "orders:2"), ("orders:0",))


def test_dropping_a_group_the_mirror_expired_confirms_it_and_one_with_leftovers_disagrees() -> None:
    ctx = FoldContext(OffsetConfig())
    g = Group("g")
    ensure_kind(g, CLASSIC, S1, ctx)
    g.pending[GROUP_TOMBSTONE] = T0
    assert drop_group(g, S2, ctx) is None
    assert g.counters["expiries_confirmed"] == 1
    assert of(ctx.events, ev.GroupDeleted)[0].reason == "expired"

    ctx = FoldContext(OffsetConfig())
    g = Group("h")
    ensure_kind(g, CLASSIC, S1, ctx)
    g.pending[("t", 0)] = T0 - 1  # expired by the mirror, never tombstoned by the broker
    assert drop_group(g, S2, ctx) is None
    (disagreement,) = of(ctx.events, ev.ExpiryDisagreement)
    assert (disagreement.reason, disagreement.partitions) == ("unconfirmed", ("t:0",))
    assert disagreement.deadline_ms == T0 - 1
    assert g.counters["expiry_disagreements"] == 1
    assert of(ctx.events, ev.GroupDeleted)[0].reason == "tombstone"


def test_src_of_is_a_records_coordinates() -> None:
    rec = Log(partition=7, start_offset=40).commit("g", "t", 0, 1)
    assert src_of(rec) == (7, 40, rec.source.timestamp_ms)
