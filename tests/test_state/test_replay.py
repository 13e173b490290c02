"""Replay of record lists built like Kafka's own tests: every situation of spec §5-§7."""

from __future__ import annotations

from typing import Any

from lab.records import MIN, Log, cm, tip
from state import events as ev
from state.model import CLASSIC, CONSUMER, SHARE, SIMPLE, STREAMS
from state.replay import DISPATCH, fold
from state.snapshot import snapshot, summary


def types(events: list[ev.Event]) -> list[str]:
    return [e.TYPE for e in events]


def of(events: list[ev.Event], cls: type[ev.Event]) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


# ------------------------------------------------------------------------------------ classic
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


def test_commit_creates_simple_group_and_k0_equals_k1() -> None:
    log = Log()
    log.commit("s", "t", 0, 7, legacy=True, metadata="old")  # 0.8.2's K=0
    log.commit("s", "t", 0, 9)  # the same partition, K=1: newer position wins
    log.commit("s", "t", 1, 3, legacy=True)
    log.offset_tombstone("s", "t", 1)  # a K=1 tombstone removes the K=0 offset (same partition)
    res = fold(None, log.records)
    g = res.group
    assert g is not None and g.display_kind == SIMPLE and g.group_type == "Classic"
    assert g.offsets == {
        ("t", 0): (9, None, None, log.records[1].value.commit_timestamp_ms, None, None, 0, 1)
    }
    assert of(res.events, ev.OffsetsCommitted)[0].count == 3


def test_transactional_commits_as_read_committed_delivers_them() -> None:
    """read_committed hands over committed transactional records at their log position, aborted
    ones never: "newest record position wins" (4.x replayEndTransactionMarker) is log order."""
    log = Log()
    log.commit("x", "t", 0, 1)  # non-transactional @0
    log.commit("x", "t", 0, 3)  # transactional @1, committed later (marker not delivered)
    log.commit("x", "t", 1, 4)  # non-transactional @2
    # an aborted transaction's records are simply absent
    g = fold(None, log.records).group
    assert g is not None and g.offsets[("t", 0)][0] == 3 and g.offsets[("t", 1)][0] == 4


def test_idempotent_replay_ignores_records_at_or_before_last_position() -> None:
    log = Log()
    log.classic("g", 1, [cm("a")])
    log.commit("g", "t", 0, 5)
    g = fold(None, log.records).group
    assert g is not None
    before = g.copy()
    again = fold(g, log.records)
    assert again.group == before and again.events == []


def test_unknown_types_and_decode_errors_are_counted_and_kept() -> None:
    log = Log()
    log.classic("g", 1, [cm("a")])
    log.unknown(99)
    log.decode_error("g")
    res = fold(None, log.records, group_id="g")
    g = res.group
    assert g is not None and g.counters["unknown_records"] == 1 and g.counters["decode_errors"] == 1
    assert [e["kind"] for e in g.errors] == ["unknown", "error"]
    assert [e["offset"] for e in res.skipped] == [1, 2]
    assert g.state == "Stable"  # nothing fatal


def test_dispatch_table_covers_every_known_record_type() -> None:
    from decoders import RECORD_TYPES

    known = set(RECORD_TYPES)
    # K=9 exists for 3.9/4.0 logs; K=18 was never released (decoders report it unknown)
    assert known - {18} <= set(DISPATCH)


# ------------------------------------------------------------------------------------ KIP-848
def test_kip848_states_move_through_assigning_reconciling_stable() -> None:
    log = Log()
    seen: list[str] = []

    def state_after(build: Any) -> str:
        build()
        res = fold(None, log.records)
        assert res.group is not None
        seen.append(res.group.state)
        return res.group.state

    # a lone K=5: the member is at its builder defaults (epoch 0, STABLE) and so are the epochs
    assert state_after(lambda: log.k848_member("k", "m1", ["t"])) == "Stable"
    assert state_after(lambda: log.k848_epoch("k", 1)) == "Assigning"  # group epoch 1 > target 0
    assert (
        state_after(lambda: (log.k848_target("k", "m1", [tip("TID", 0, 1)]), log.k848_target_epoch("k", 1)))
        == "Reconciling"
    )
    assert state_after(lambda: log.k848_current("k", "m1", 1, [tip("TID", 0, 1)])) == "Stable"
    # a second member joins: epoch 2, assignment computed, m1 must revoke 1
    log.k848_member("k", "m2", ["t"])
    log.k848_epoch("k", 2)
    assert state_after(lambda: None) == "Assigning"
    log.k848_target("k", "m1", [tip("TID", 0)])
    log.k848_target("k", "m2", [tip("TID", 1)])
    log.k848_target_epoch("k", 2)
    log.k848_current("k", "m1", 1, [tip("TID", 0)], pending=[tip("TID", 1)], state=1)
    log.k848_current("k", "m2", 2, [], state=2)
    assert state_after(lambda: None) == "Reconciling"
    log.k848_current("k", "m1", 2, [tip("TID", 0)])
    log.k848_current("k", "m2", 2, [tip("TID", 1)])
    assert state_after(lambda: None) == "Stable"
    res = fold(None, log.records)
    g = res.group
    assert g is not None and g.group_epoch == 2 and g.assignment_epoch == 2
    assert g.members["m2"].member_epoch == 2 and g.members["m1"].assignment == (("TID", (0,)),)
    snap = snapshot(g)
    assert snap["members"][0]["assignment"] == [{"topic": "TID", "partitions": [0]}]  # no name known: the id


def test_kip848_topic_names_from_partition_metadata_and_commits() -> None:
    log = Log()
    log.k848_stable_group("k", {"m1": (["orders"], [tip("OID", 0, 1)])})
    g = fold(None, log.records).group
    assert g is not None
    assert snapshot(g)["members"][0]["assignment"] == [{"topic": "OID", "partitions": [0, 1]}]
    log.k848_partition_metadata("k", {"OID": "orders"})  # <= 4.0 wrote it
    g = fold(None, log.records).group
    assert g is not None and snapshot(g)["members"][0]["assignment"] == [
        {"topic": "orders", "partitions": [0, 1]}
    ]
    log2 = Log()
    log2.k848_stable_group("k", {"m1": (["orders"], [tip("OID", 0, 1)])})
    log2.commit("k", "orders", 0, 5, topic_id="OID")  # 4.1+ offset commit v4 topicId
    g2 = fold(None, log2.records).group
    assert g2 is not None and g2.topic_names == {"OID": "orders"}


def test_kip848_member_leave_and_group_delete_order() -> None:
    log = Log()
    log.k848_stable_group("k", {"m1": (["t"], [tip("T", 0)]), "m2": (["t"], [tip("T", 1)])})
    log.k848_leave("k", "m2")
    log.k848_epoch("k", 2)
    res = fold(None, log.records)
    g = res.group
    assert g is not None and sorted(g.members) == ["m1"] and g.state == "Assigning"
    assert [e.member_id for e in of(res.events, ev.MemberLeft)] == ["m2"]
    log.k848_leave("k", "m1")
    log.k848_delete("k")
    res = fold(None, log.records)
    assert res.group is None and types(res.events)[-1] == "group_deleted"


def test_kip848_tombstone_for_unknown_group_or_member_is_ignored() -> None:
    log = Log()
    log.k848_current("nope", "m", None)
    log.k848_member("nope", "m", None)
    log.k848_epoch("nope", None)
    res = fold(None, log.records)
    assert res.group is None and res.events == []


def test_classic_tombstone_for_unknown_group_is_ignored() -> None:
    """Seen on 4.3.1: the coordinator deletes a group left with no offsets (an aborted
    transactional commit) at its next retention check and writes a K=2 tombstone for it."""
    log = Log()
    log.classic_tombstone("never-seen")
    res = fold(None, log.records)
    assert res.group is None and res.events == []


def test_classic_to_consumer_conversion_keeps_offsets() -> None:
    """4.x online upgrade: K=2 tombstone, then K=3..8 -- the group lives on, offsets kept."""
    log = Log()
    log.classic("g", 3, [])
    log.commit("g", "t", 0, 42)
    log.classic_tombstone("g")
    log.k848_stable_group("g", {"m1": (["t"], [tip("T", 0)])}, epoch=4)
    res = fold(None, log.records)
    g = res.group
    assert g is not None and g.kind == CONSUMER and g.offsets[("t", 0)][0] == 42 and g.state == "Stable"
    kinds = [(e.before, e.after) for e in of(res.events, ev.KindChanged)]
    assert kinds == [(CLASSIC, SIMPLE), (SIMPLE, CONSUMER)]
    assert not of(res.events, ev.GroupDeleted)


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


def test_kip848_regex_topics_count_as_subscribed() -> None:
    from state.expiry import consumer_subscribed_topics

    log = Log()
    log.k848_member("k", "m1", [], regex="orders.*")
    log.k848_epoch("k", 1)
    log.k848_regex("k", "orders.*", ["orders.eu", "orders.us"])
    g = fold(None, log.records).group
    assert g is not None and consumer_subscribed_topics(g) == {"orders.eu", "orders.us"}
    log.k848_regex("k", "orders.*", None)
    g = fold(None, log.records).group
    assert g is not None and consumer_subscribed_topics(g) == set()


def test_kip848_classic_protocol_members_votes() -> None:
    log = Log()
    log.k848_member("k", "a", ["t"], protocols=["cooperative-sticky", "range"])
    log.k848_member("k", "b", ["t"], protocols=["range", "cooperative-sticky"])
    log.k848_member("k", "c", ["t"], protocols=["range"])
    log.k848_member("k", "d", ["t"])  # a KIP-848 member: no classic protocols, no vote
    g = fold(None, log.records).group
    assert g is not None
    votes = snapshot(g)["protocol_votes"]
    assert votes == {
        "supported": {"cooperative-sticky": 2, "range": 3},
        "candidates": ["range"],
        "votes": {"range": 3},
        "selected": "range",
    }


def test_kip848_static_member_replacement() -> None:
    log = Log()
    log.k848_member("k", "m1", ["t"], instance_id="i1")
    log.k848_member("k", "m2", ["t"], instance_id="i1")  # new member id, same instance
    log.k848_leave("k", "m1")
    res = fold(None, log.records)
    assert [(e.before, e.after) for e in of(res.events, ev.MemberReplaced)] == [("m1", "m2")]
    assert not of(res.events, ev.MemberLeft)
    log2 = Log()
    log2.k848_member("k", "m1", ["t"], instance_id="i1")
    log2.tick(5)
    log2.k848_leave("k", "m1")  # old leaves first, new joins in the same write (same time)
    log2.k848_member("k", "m2", ["t"], instance_id="i1")
    res2 = fold(None, log2.records)
    assert [(e.before, e.after) for e in of(res2.events, ev.MemberReplaced)] == [("m1", "m2")]


def test_server_assignor_is_the_protocol_of_a_consumer_group() -> None:
    log = Log()
    log.k848_member("k", "m1", ["t"], assignor="range")
    log.k848_member("k", "m2", ["t"], assignor="uniform")
    log.k848_member("k", "m3", ["t"], assignor="uniform")
    res = fold(None, log.records)
    assert res.group is not None and res.group.protocol == "uniform"
    assert [(e.before, e.after) for e in of(res.events, ev.ProtocolChanged)] == [("range", "uniform")]


# ------------------------------------------------------------------------------ share, streams
def test_share_group() -> None:
    log = Log()
    log.share_member("s", "m1", ["share-t"])
    log.share_epoch("s", 1)
    log.share_target("s", "m1", [tip("SID", 0, 1)])
    log.share_target_epoch("s", 1)
    log.share_current("s", "m1", 1, [tip("SID", 0, 1)])
    log.share_state("s", {"SID": "share-t"})
    res = fold(None, log.records)
    g = res.group
    assert g is not None and g.kind == SHARE and g.state == "Stable" and g.group_epoch == 1
    snap = snapshot(g)
    assert snap["members"][0]["assignment"] == [{"topic": "share-t", "partitions": [0, 1]}]
    assert snap["share_topics"]["initialized"] == ["share-t"]
    assert summary(g)["epoch"] == 1 and summary(g)["kind"] == SHARE


def test_streams_group_not_ready_until_topology_validated() -> None:
    log = Log()
    log.streams_member("st", "m1")
    log.streams_epoch("st", 1, validated=None)
    res = fold(None, log.records)
    assert res.group is not None and res.group.state == "NotReady"
    log.streams_topology("st", 0, ["in"])
    log.streams_epoch("st", 2, validated=0)
    log.streams_target("st", "m1", [0, 1])
    log.streams_target_epoch("st", 2)
    log.streams_current("st", "m1", 2, [0, 1])
    res = fold(None, log.records)
    g = res.group
    assert g is not None and g.kind == STREAMS and g.state == "Stable" and g.topology_epoch == 0
    assert g.members["m1"].assignment == (("0", (0, 1)),)
    assert g.topology == {"source_topics": ["in"], "subtopologies": ["0"]}


def test_summary_fields() -> None:
    log = Log()
    log.classic("g", 3, [cm("a")])
    log.commit("g", "t", 0, 1)
    g = fold(None, log.records).group
    assert g is not None
    s = summary(g)
    assert s == {
        "group_id": "g",
        "exists": True,
        "kind": CLASSIC,
        "type": "Classic",
        "state": "Stable",
        "epoch": 3,
        "members": 1,
        "offsets": 1,
        "last_change_ms": log.now_ms,
        "last_rebalance_ms": g.last_rebalance_ms,
        "next_deadline_ms": None,
    }


def test_share_and_streams_group_deletion_tombstones() -> None:
    from decoders.records import GroupKey, MemberKey

    log = Log()
    log.share_member("s", "m1", ["share-t"])
    log.share_epoch("s", 1)
    log.share_target("s", "m1", [tip("SID", 0)])
    log.share_target_epoch("s", 1)
    log.share_current("s", "m1", 1, [tip("SID", 0)])
    log.share_state("s", {"SID": "share-t"})
    # ShareGroup.createGroupTombstoneRecords: K=14, K=13, K=12, K=10, K=15, K=11
    for k, key in ((14, MemberKey("s", "m1")), (13, MemberKey("s", "m1")), (12, GroupKey("s"))):
        log.rec(k, key, None)
    log.share_member("s", "m1", None)
    log.rec(15, GroupKey("s"), None)
    res = fold(None, log.records)
    assert res.group is not None and res.group.state == "Empty" and res.group.share_topics is None
    log.share_epoch("s", None)
    res = fold(None, log.records)
    assert res.group is None and types(res.events)[-1] == "group_deleted"

    log = Log()
    log.streams_member("st", "m1")
    log.streams_topology("st", 0, ["in"])
    log.streams_epoch("st", 1)
    log.streams_target("st", "m1", [0])
    log.streams_target_epoch("st", 1)
    log.streams_current("st", "m1", 1, [0])
    log.commit("st", "in", 0, 3)
    # StreamsGroup.createGroupTombstoneRecords: K=22, K=21, K=20, K=19, K=17, K=23
    for k, key in ((22, MemberKey("st", "m1")), (21, MemberKey("st", "m1")), (20, GroupKey("st"))):
        log.rec(k, key, None)
    log.rec(19, MemberKey("st", "m1"), None)
    log.streams_epoch("st", None)
    log.rec(23, GroupKey("st"), None)
    res = fold(None, log.records)
    g = res.group
    assert g is not None and g.display_kind == SIMPLE and g.offsets  # offsets outlive the group object
    assert [(e.before, e.after) for e in of(res.events, ev.KindChanged)] == [(STREAMS, SIMPLE)]


def test_k848_target_and_metadata_tombstones() -> None:
    log = Log()
    log.k848_stable_group("k", {"m1": (["t"], [tip("T", 0)])}, epoch=3)
    log.k848_partition_metadata("k", {"T": "t"})
    log.k848_target("k", "m1", None)
    log.k848_target_epoch("k", None)
    log.k848_partition_metadata("k", None)
    g = fold(None, log.records).group
    assert g is not None and g.targets == {} and g.assignment_epoch == -1
    assert g.topic_names == {"T": "t"}  # names learned stay learned
    assert g.state == "Assigning"  # group epoch 3 > assignment epoch -1


# ------------------------------------------------------------ what the metrics need (codec v2)
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


def test_last_rebalance_time_of_a_kip848_group_is_the_target_epoch_bump() -> None:
    log = Log()
    log.k848_stable_group("k", {"m1": (["t"], [tip("T", 0)])})
    bump = log.now_ms
    log.tick(MIN).k848_member("k", "m2", ["t"])
    log.k848_epoch("k", 2)  # group epoch only: Assigning, the rebalance has not completed
    g = fold(None, log.records).group
    assert g is not None and g.state == "Assigning" and g.last_rebalance_ms == bump
    log.tick(MIN).k848_target_epoch("k", 2)
    g = fold(None, log.records).group
    assert g is not None and g.last_rebalance_ms == log.now_ms and g.counters["rebalances"] == 2


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
