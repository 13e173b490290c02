"""Modern groups (`state.replay.modern`): KIP-848 consumer groups (K=3..8, 16), share groups
(K=9..15) and streams groups (K=17, 19..23) -- states from epochs, members, targets and current
assignments, conversions from and to classic, static replacements, and each kind's deletion
tombstones in the order the coordinator writes them."""

from __future__ import annotations

from typing import Any

from lab.records import MIN, Log, tip
from state import events as ev
from state.model import CLASSIC, CONSUMER, SHARE, SIMPLE, STREAMS
from state.replay import fold, modern
from state.replay.dispatch import DISPATCH
from state.snapshot import snapshot, summary
from tests.support.replay import of, types


def test_every_modern_record_type_is_dispatched_here() -> None:
    assert {k for k, fn in DISPATCH.items() if fn.__module__ == modern.__name__} == {
        *range(3, 18),
        *range(19, 24),
    }


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
    assert g.topology == {"source_topics": ["in"], "subtopologies": ["0"], "source_topics_of": {"0": ["in"]}}


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
