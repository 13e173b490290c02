"""Offset commits and offset tombstones (`state.replay.offsets`, K=0 and K=1): the simple group a
commit creates, the newest log position winning, and read_committed's delivery order."""

from __future__ import annotations

from lab.records import MIN, Log, cm
from state import events as ev
from state.config import OffsetConfig
from state.expiry import GROUP_TOMBSTONE, expire
from state.model import SIMPLE
from state.replay import fold
from state.replay.dispatch import DISPATCH
from state.replay.offsets import replay_offset_commit
from tests.support.replay import of


def test_k0_and_k1_are_dispatched_here() -> None:
    assert DISPATCH[0] is DISPATCH[1] is replay_offset_commit


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


def test_an_offset_tombstone_is_an_expiry_an_admin_delete_or_a_disagreement() -> None:
    """`classify_tombstone` by the tombstone's record time: after the offset's deadline it is the
    broker's expiry (``OffsetsExpired`` with origin broker); before it, for a topic the Stable
    group still consumes, a disagreement; otherwise an admin delete (``OffsetsDeleted``)."""
    log = Log()
    log.classic("g", 1, [cm("a", topics=["t"])])
    log.commit("g", "t", 0, 5)
    log.commit("g", "u", 0, 6)
    log.offset_tombstone("g", "t", 0)  # subscribed, Stable, before any deadline
    log.offset_tombstone("g", "u", 0)  # a topic nobody subscribes to: DeleteOffsets
    res = fold(None, log.records)
    g = res.group
    assert g is not None and g.offsets == {}
    assert g.counters["expiry_disagreements"] == 1 and g.counters["offsets_deleted"] == 1
    assert [e.partitions for e in of(res.events, ev.ExpiryDisagreement)] == [("t:0",)]
    assert [e.partitions for e in of(res.events, ev.OffsetsDeleted)] == [("u:0",)]

    late = Log()
    late.commit("s", "t", 0, 5)  # a simple group: expires retention after its commit
    late.tick(OffsetConfig().retention_ms + MIN).offset_tombstone("s", "t", 0)
    res = fold(None, late.records)
    # the group object stays until the broker's own group tombstone (Rule 8)
    assert res.group is not None and res.group.offsets == {} and res.group.counters["offsets_expired"] == 1
    (expired,) = of(res.events, ev.OffsetsExpired)
    assert (expired.origin, expired.partitions, expired.at_ms) == ("broker", ("t:0",), late.now_ms)


def test_a_tombstone_of_an_offset_already_gone_confirms_the_mirrors_expiry() -> None:
    log = Log()
    log.commit("s", "t", 0, 5)
    log.commit("s", "t", 1, 5)
    g = fold(None, log.records).group
    assert g is not None
    deadline = OffsetConfig().retention_ms + log.now_ms
    kept, _ = expire(g, deadline)  # the mirror expires both and waits for the broker's tombstones
    assert kept is not None and set(kept.pending) == {("t", 0), ("t", 1), GROUP_TOMBSTONE}
    log.tick(OffsetConfig().retention_ms).offset_tombstone("s", "t", 0)
    res = fold(kept, log.records[-1:])
    assert res.group is not None and res.group.counters["expiries_confirmed"] == 1
    assert set(res.group.pending) == {("t", 1), GROUP_TOMBSTONE} and res.events == []


def test_a_commit_clears_the_mirrors_pending_expiry_of_its_partition() -> None:
    """A consumer that commits again after the mirror expired the offset: the broker will write
    no tombstone for it, so nothing waits for one."""
    log = Log()
    log.commit("s", "t", 0, 5)
    g = fold(None, log.records).group
    assert g is not None
    kept, _ = expire(g, OffsetConfig().retention_ms + log.now_ms)
    assert kept is not None and ("t", 0) in kept.pending
    log.tick(OffsetConfig().retention_ms + 1).commit("s", "t", 0, 9)
    g2 = fold(kept, log.records[-1:]).group
    assert g2 is not None and ("t", 0) not in g2.pending and g2.offsets[("t", 0)][0] == 9


def test_a_commit_with_a_topic_id_names_the_topic() -> None:
    log = Log()
    log.commit("s", "orders", 0, 1, topic_id="OID")
    g = fold(None, log.records).group
    assert g is not None and g.topic_names == {"OID": "orders"} and g.offsets[("orders", 0)][5] == "OID"
