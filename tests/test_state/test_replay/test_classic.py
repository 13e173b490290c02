"""Classic groups (`state.replay.classic`, K=2): each GroupMetadataValue diffed against the mirror into
joins, leaves, static replacements, rebalances, leader and protocol changes; the group tombstone."""

from __future__ import annotations

from lab.records import MIN, Log, cm, tip
from state import events as ev
from state.model import CLASSIC
from state.replay import fold
from state.replay.classic import replay_group_metadata
from state.replay.dispatch import DISPATCH
from state.snapshot import snapshot
from tests.support.replay import of, types


def test_k2_is_dispatched_here() -> None:
    assert DISPATCH[2] is replay_group_metadata


def test_classic_group_lifecycle_joins_leaves_and_generations() -> None:
    log = Log()
    log.new_empty_group("g")  # 4.x: JoinGroup creating the group
    log.tick(3000).classic("g", 1, [cm("a", assigned={"t": [0, 1]})])
    log.commit("g", "t", 0, 10)
    log.tick(MIN).classic("g", 2, [cm("a", assigned={"t": [0]}), cm("b", assigned={"t": [1]})])
    log.tick(MIN).classic("g", 5, [cm("b", assigned={"t": [0, 1]})], leader="b")  # 3 and 4 never logged
    res = fold(None, log.records)
    g = res.group
    assert g is not None
    assert (g.kind, g.state, g.generation, g.protocol, g.leader) == (CLASSIC, "Stable", 5, "range", "b")
    assert sorted(g.members) == ["b"]
    assert g.members["b"].assignment == (("t", (0, 1)),)
    rebal = of(res.events, ev.RebalanceCompleted)
    assert [(e.before, e.after, e.skipped) for e in rebal] == [(0, 1, 0), (1, 2, 0), (2, 5, 2)]
    assert g.counters["rebalances"] == 3 and g.counters["skipped_generations"] == 2
    assert [e.member_id for e in of(res.events, ev.MemberJoined)] == ["a", "b"]
    assert [e.member_id for e in of(res.events, ev.MemberLeft)] == ["a"]
    assert [(e.before, e.after) for e in of(res.events, ev.LeaderChanged)] == [("a", "b")]
    moves = {(e.member_id, e.added, e.removed) for e in of(res.events, ev.AssignmentChanged)}
    assert ("b", ("t:0",), ()) in moves  # b took partition 0 over
    assert types(res.events)[0] == "group_created"
    assert types(res.events)[-1] == "offsets_committed"


def test_classic_empty_group_keeps_offsets_and_state_time() -> None:
    log = Log()
    log.classic("g", 1, [cm("a")])
    log.commit("g", "t", 0, 5)
    log.tick(MIN).classic("g", 2, [], state_ts=log.now_ms - 5)
    res = fold(None, log.records)
    g = res.group
    assert g is not None and g.state == "Empty" and g.leader is None and g.protocol is None
    assert g.current_state_timestamp_ms == log.now_ms - 5 == g.state_since_ms
    assert g.offsets[("t", 0)][0] == 5
    changes = [(e.before, e.after) for e in of(res.events, ev.StateChanged)]
    assert changes == [("Dead", "Empty"), ("Empty", "Stable"), ("Stable", "Empty")] or changes[-1] == (
        "Stable",
        "Empty",
    )


def test_static_member_replacement_is_one_event_and_keeps_assignment() -> None:
    log = Log()
    a = cm("sa-1", instance_id="sa", assigned={"t": [0, 1]})
    b = cm("sb-1", instance_id="sb", assigned={"t": [2, 3]})
    log.classic("g", 1, [a, b], leader="sb-1")
    a2 = cm("sa-2", instance_id="sa", assigned={"t": [0, 1]})
    log.tick(MIN).classic("g", 1, [a2, b], leader="sb-1")  # KIP-345: same generation, new member id
    res = fold(None, log.records)
    g = res.group
    assert g is not None and sorted(g.members) == ["sa-2", "sb-1"]
    rep = of(res.events, ev.MemberReplaced)
    assert [(e.instance_id, e.before, e.after) for e in rep] == [("sa", "sa-1", "sa-2")]
    assert g.counters["member_replacements"] == 1 and g.counters["member_leaves"] == 0
    assert not [e for e in of(res.events, ev.AssignmentChanged) if e.member_id == "sa-2"]
    assert g.counters["rebalances"] == 1  # the replacement wrote the same generation


def test_replaced_static_leader_changes_leader() -> None:
    log = Log()
    log.classic("g", 1, [cm("sa-1", instance_id="sa")], leader="sa-1")
    log.classic("g", 1, [cm("sa-2", instance_id="sa")], leader="sa-2")
    res = fold(None, log.records)
    assert [(e.before, e.after) for e in of(res.events, ev.LeaderChanged)] == [("sa-1", "sa-2")]


def test_protocol_change_and_non_consumer_protocol_type() -> None:
    log = Log()
    log.classic("g", 1, [cm("a")], protocol="range")
    log.classic("g", 2, [cm("a")], protocol="cooperative-sticky")
    log.classic("c", 1, [cm("w")], protocol_type="connect", protocol="sessioned")
    res = fold(None, [r for r in log.records if r.key.group_id == "g"])
    assert [(e.before, e.after) for e in of(res.events, ev.ProtocolChanged)] == [
        ("range", "cooperative-sticky")
    ]
    conn = fold(None, [r for r in log.records if r.key.group_id == "c"]).group
    assert conn is not None and conn.protocol_type == "connect" and conn.display_kind == CLASSIC


def test_group_tombstone_without_offsets_deletes() -> None:
    log = Log()
    log.classic("g", 1, [cm("a")])
    log.commit("g", "t", 0, 5)
    log.classic("g", 2, [])
    log.offset_tombstone("g", "t", 0)  # DeleteGroups: offsets first ...
    log.classic_tombstone("g")  # ... then the group
    res = fold(None, log.records)
    assert res.group is None
    assert types(res.events)[-2:] == ["offsets_deleted", "group_deleted"]
    deleted = of(res.events, ev.GroupDeleted)[0]
    assert (deleted.kind, deleted.reason) == (CLASSIC, "tombstone")


def test_classic_tombstone_for_unknown_group_is_ignored() -> None:
    """Seen on 4.3.1: the coordinator deletes a group left with no offsets (an aborted
    transactional commit) at its next retention check and writes a K=2 tombstone for it."""
    log = Log()
    log.classic_tombstone("never-seen")
    res = fold(None, log.records)
    assert res.group is None and res.events == []


def test_consumer_to_classic_downgrade() -> None:
    log = Log()
    log.commit("g", "t", 0, 1)
    log.k848_stable_group("g", {"m1": (["t"], [tip("T", 0)])})
    log.k848_leave("g", "m1")
    log.k848_delete("g")
    log.classic("g", 2, [cm("c1")])
    res = fold(None, log.records)
    g = res.group
    assert g is not None and g.kind == CLASSIC and g.state == "Stable" and g.generation == 2
    assert g.offsets[("t", 0)][0] == 1


def test_last_rebalance_time_is_the_record_time_of_the_last_generation_bump() -> None:
    log = Log()
    log.new_empty_group("g")  # generation 0: no rebalance completed yet
    g = fold(None, log.records).group
    assert g is not None and g.last_rebalance_ms is None
    log.tick(MIN).classic("g", 1, [cm("a")])
    first = log.now_ms
    log.tick(MIN).commit("g", "t", 0, 1)
    log.tick(MIN).classic("g", 1, [cm("a")])  # same generation rewritten: no rebalance
    g = fold(None, log.records).group
    assert g is not None and g.last_rebalance_ms == first
    log.tick(MIN).classic("g", 3, [cm("a"), cm("b")])  # 2 skipped, still one completion
    g = fold(None, log.records).group
    assert g is not None and g.last_rebalance_ms == log.now_ms
    assert snapshot(g)["last_rebalance_ms"] == log.now_ms
