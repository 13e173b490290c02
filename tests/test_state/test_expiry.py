"""Kafka's expiry rules per group situation and semantics generation, advancing now_ms (spec §6)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from lab.records import DAY, HOUR, MIN, T0, Log, cm, tip
from state import events as ev
from state.config import OffsetConfig
from state.expiry import (
    GROUP_TOMBSTONE,
    GROUP_TOMBSTONE_OVERDUE,
    all_deadlines,
    expire,
    expires_at_ms,
    next_deadline_ms,
)
from state.model import Group
from state.replay import fold

R = 7 * DAY
S4 = OffsetConfig(retention_ms=R, semantics="4.x", confirm_grace_ms=11 * MIN)
S3 = OffsetConfig(retention_ms=R, semantics="2.1-3.x", confirm_grace_ms=11 * MIN)
S2 = OffsetConfig(retention_ms=R, semantics="<=2.0", confirm_grace_ms=11 * MIN)

C = T0 + HOUR  # the commit time used by every table row
EMPTY_AT = T0 + 2 * HOUR  # when the Empty classic groups became Empty


def _build(fn: Callable[[Log], None]) -> Group:
    log = Log()
    fn(log)
    g = fold(None, log.records).group
    assert g is not None
    return g


def simple(log: Log) -> None:
    log.tick(HOUR).commit("g", "t", 0, 1)
    log.commit("g", "u", 0, 1)


def classic_empty(log: Log) -> None:
    log.classic("g", 1, [cm("a", ["t"])])
    log.tick(HOUR).commit("g", "t", 0, 1)
    log.commit("g", "u", 0, 1)
    log.tick(HOUR).classic("g", 2, [])  # became Empty at EMPTY_AT


def classic_empty_v1(log: Log) -> None:
    log.classic("g", 1, [cm("a", ["t"])], state_ts=None)
    log.tick(HOUR).commit("g", "t", 0, 1)
    log.commit("g", "u", 0, 1)
    log.tick(HOUR).classic("g", 2, [], state_ts=None)  # a V0/V1 group record: no currentStateTimestamp


def classic_stable(log: Log) -> None:
    log.classic("g", 1, [cm("a", ["t"])])
    log.tick(HOUR).commit("g", "t", 0, 1)
    log.commit("g", "u", 0, 1)  # "u": nobody subscribes to it


def classic_stable_unparsable(log: Log) -> None:
    from dataclasses import replace

    from decoders.records import NO_SOURCE, DecodeError, ErrorKind

    bad = replace(
        cm("a"),
        consumer_subscription=None,
        subscription_error=DecodeError(
            NO_SOURCE, 2, 3, "subscription", "topics", 2, ErrorKind.TRUNCATED, "x"
        ),
    )
    log.classic("g", 1, [bad])
    log.tick(HOUR).commit("g", "t", 0, 1)
    log.commit("g", "u", 0, 1)


def connect_stable(log: Log) -> None:
    log.classic("g", 1, [cm("w", ["t"])], protocol_type="connect", protocol="sessioned")
    log.tick(HOUR).commit("g", "t", 0, 1)
    log.commit("g", "u", 0, 1)


def joining(log: Log) -> None:
    log.tick(HOUR).commit("g", "t", 0, 1)
    log.commit("g", "u", 0, 1)
    log.classic_tombstone("g")  # (offsets keep a simple group alive)
    log.new_empty_group("g")  # a JoinGroup recreated it: PreparingRebalance in the broker


def consumer_stable(log: Log) -> None:
    log.k848_stable_group("g", {"m": (["t"], [tip("T", 0)])})
    log.tick(HOUR).commit("g", "t", 0, 1)
    log.commit("g", "u", 0, 1)


def consumer_assigning(log: Log) -> None:
    consumer_stable(log)
    log.k848_epoch("g", 2)  # not Stable: the rule does not care (any state)


def consumer_empty(log: Log) -> None:
    consumer_stable(log)
    log.k848_leave("g", "m")


def streams_stable(log: Log) -> None:
    log.streams_member("g", "m")
    log.streams_topology("g", 0, ["t"])
    log.streams_epoch("g", 1, validated=0)
    log.streams_target_epoch("g", 1)
    log.streams_current("g", "m", 1, [0])
    log.tick(HOUR).commit("g", "t", 0, 1)
    log.commit("g", "u", 0, 1)


def share_stable(log: Log) -> None:
    log.share_member("g", "m", ["t"])
    log.share_epoch("g", 1)
    log.tick(HOUR).commit("g", "t", 0, 1)  # (share groups commit nothing; the rule is what matters)


NONE = None
# (situation, builder, semantics, expected deadline of t-0, expected deadline of u-0)
TABLE = [
    ("rule 4: simple group, commit time", simple, S4, C + R, C + R),
    ("rule 2: classic Empty, time it became Empty", classic_empty, S4, EMPTY_AT + R, EMPTY_AT + R),
    ("rule 2: classic Empty, unknown state time -> commit time", classic_empty_v1, S4, C + R, C + R),
    ("rule 3: classic Stable consumer, unsubscribed topics only", classic_stable, S4, NONE, C + R),
    (
        "rule 3: subscriptions unknown -> nothing (isSubscribedToTopic)",
        classic_stable_unparsable,
        S4,
        NONE,
        NONE,
    ),
    ("rule 7: a non-empty connect group", connect_stable, S4, NONE, NONE),
    ("rule 7: a classic group joining its first generation", joining, S4, NONE, NONE),
    ("rule 5: KIP-848 Stable, unsubscribed topics", consumer_stable, S4, NONE, C + R),
    ("rule 5: KIP-848 in any state", consumer_assigning, S4, NONE, C + R),
    ("rule 5: KIP-848 Empty: everything from commit time", consumer_empty, S4, C + R, C + R),
    ("rule 6: streams, source topics protected", streams_stable, S4, NONE, C + R),
    ("rule 7: share groups never", share_stable, S4, NONE, NONE),
    ("2.1-3.x: same classic rules", classic_empty, S3, EMPTY_AT + R, EMPTY_AT + R),
    ("2.1-3.x: Stable consumer", classic_stable, S3, NONE, C + R),
    ("<=2.0: commit time + retention, any state, strictly after", classic_stable, S2, C + R + 1, C + R + 1),
    ("<=2.0: Empty group too", classic_empty, S2, C + R + 1, C + R + 1),
]


@pytest.mark.parametrize(
    ("situation", "build", "settings", "t_deadline", "u_deadline"), TABLE, ids=[r[0] for r in TABLE]
)
def test_expiry_table(
    situation: str,
    build: Callable[[Log], None],
    settings: OffsetConfig,
    t_deadline: int | None,
    u_deadline: int | None,
) -> None:
    g = _build(build)
    assert expires_at_ms(g, "t", 0, settings) == t_deadline
    if ("u", 0) in g.offsets:
        assert expires_at_ms(g, "u", 0, settings) == u_deadline
    # the whole-group evaluation (an inlined loop: the adapter's hot path) gives the same figures
    assert all_deadlines(g, settings) == {tp: expires_at_ms(g, *tp, settings) for tp in g.offsets}
    deadlines = [t_deadline] if t_deadline is not None else []
    if ("u", 0) in g.offsets and u_deadline is not None:
        deadlines.append(u_deadline)
    assert next_deadline_ms(g, settings) == (min(deadlines) if deadlines else None)
    # advancing now: one ms before the deadline nothing happens, at the deadline it expires
    for tp, d in ((("t", 0), t_deadline), (("u", 0), u_deadline)):
        if tp not in g.offsets:
            continue
        probe = g.copy()
        if d is None:
            after, _ = expire(probe, T0 + 100 * 365 * DAY, settings)
            assert after is not None and tp in after.offsets
            continue
        kept, events = expire(probe, d - 1, settings)
        assert kept is not None and tp in kept.offsets
        gone, events = expire(probe, d, settings)  # boundary: now - base == retention expires
        assert gone is None or tp not in gone.offsets
        assert any(isinstance(e, ev.OffsetsExpired) and f"{tp[0]}:{tp[1]}" in e.partitions for e in events)


def test_explicit_expire_timestamp_wins() -> None:
    log = Log()
    log.tick(HOUR).commit("g", "t", 0, 1, expire_ts=C + DAY)  # OffsetCommit v2-v4 retention: value v1
    log.commit("g", "t", 1, 1)
    g = fold(None, log.records).group
    assert g is not None
    assert expires_at_ms(g, "t", 0, S4) == C + DAY  # 2.1+: now >= expireTimestamp
    assert expires_at_ms(g, "t", 0, S2) == C + DAY + 1  # <=2.0: expireTimestamp < now
    assert expires_at_ms(g, "t", 1, S4) == C + R
    assert all_deadlines(g, S4) == {("t", 0): C + DAY, ("t", 1): C + R}
    assert all_deadlines(g, S2) == {("t", 0): C + DAY + 1, ("t", 1): C + R + 1}
    # in an Empty classic group the explicit timestamp still wins over the Empty time
    log2 = Log()
    log2.classic("e", 1, [cm("a")])
    log2.tick(HOUR).commit("e", "t", 0, 1, expire_ts=C + DAY)
    log2.tick(HOUR).classic("e", 2, [])
    g2 = fold(None, log2.records).group
    assert g2 is not None and expires_at_ms(g2, "t", 0, S4) == C + DAY
    # ... but a subscribed topic of a Stable group never expires, explicit timestamp or not
    log3 = Log()
    log3.classic("s", 1, [cm("a", ["t"])])
    log3.commit("s", "t", 0, 1, expire_ts=C)
    g3 = fold(None, log3.records).group
    assert g3 is not None and expires_at_ms(g3, "t", 0, S4) is None


def test_empty_group_expires_all_offsets_even_recent_ones() -> None:
    """Rule 2's consequence: once Empty-time + retention passed, a fresh admin reset expires too."""
    log = Log()
    log.classic("g", 1, [cm("a")])
    log.tick(HOUR).classic("g", 2, [])
    log.tick(R).commit("g", "t", 0, 1)  # committed 7 days after the group became Empty
    g = fold(None, log.records).group
    assert g is not None and expires_at_ms(g, "t", 0, S4) == T0 + HOUR + R


def test_group_deleted_when_empty_without_offsets_and_broker_confirms() -> None:
    log = Log()
    classic_empty(log)
    g = fold(None, log.records).group
    assert g is not None
    g, events = expire(g, EMPTY_AT + R, S4)
    # the offsets expire; the group (Empty, no offsets) is deleted at the broker's next sweep, not
    # before: until its tombstone the coordinator still lists it, so the mirror keeps it
    assert g is not None and g.exists and g.state == "Empty"
    assert [e.TYPE for e in events] == ["offsets_expired"]
    assert set(g.pending) == {("t", 0), ("u", 0), GROUP_TOMBSTONE}
    assert next_deadline_ms(g, S4) == EMPTY_AT + R + 11 * MIN + 1
    # the broker's sweep: offset tombstones then the group tombstone, within the grace period
    log.tick(R + 5 * MIN)
    log.offset_tombstone("g", "t", 0)
    log.offset_tombstone("g", "u", 0)
    log.classic_tombstone("g")
    res = fold(g, log.records[-3:], config=S4)
    assert res.group is None
    assert [(e.TYPE, getattr(e, "reason", None)) for e in res.events] == [("group_deleted", "expired")]


def test_group_emptied_and_rejoined_before_the_sweep_was_never_deleted() -> None:
    """The broker deletes an Empty group only at its sweep: a member back before then finds the
    same group, so the mirror reports no deletion and no re-creation, and stops waiting."""
    log = Log()
    classic_empty(log)
    log.offset_tombstone("g", "t", 0)  # OffsetDelete of both offsets: Empty, no offsets
    log.offset_tombstone("g", "u", 0)
    g = fold(None, log.records).group
    assert g is not None
    g, events = expire(g, log.now_ms, S4)
    assert g is not None and g.exists and g.pending == {GROUP_TOMBSTONE: log.now_ms} and events == []
    log.tick(MIN).classic("g", 3, [cm("b", ["t"])])
    res = fold(g, log.records[-1:], config=S4)
    assert res.group is not None and res.group.state == "Stable"
    assert "group_created" not in [e.TYPE for e in res.events]
    g, events = expire(res.group, log.now_ms, S4)
    assert g is not None and g.pending == {} and events == []


def test_unconfirmed_expiry_is_a_disagreement() -> None:
    log = Log()
    simple(log)
    g = fold(None, log.records).group
    assert g is not None
    g, events = expire(g, C + R, S4)  # both offsets expired; simple group Empty with no offsets
    assert g is not None and g.exists and set(g.pending) == {("t", 0), ("u", 0), GROUP_TOMBSTONE}
    g, events = expire(g, C + R + 11 * MIN, S4)  # still within grace
    assert g is not None and not [e for e in events if isinstance(e, ev.ExpiryDisagreement)]
    g, events = expire(g, C + R + 11 * MIN + 1, S4)
    dis = [e for e in events if isinstance(e, ev.ExpiryDisagreement)]
    assert len(dis) == 1 and dis[0].reason == "unconfirmed" and dis[0].partitions == ("<group>", "t:0", "u:0")
    # the broker evidently keeps the group: so does the mirror, without asking again
    assert g is not None and g.exists and g.state == "Empty"
    assert set(g.pending) == {GROUP_TOMBSTONE_OVERDUE} and next_deadline_ms(g, S4) is None
    g, events = expire(g, C + R + 3 * 11 * MIN, S4)
    assert g is not None and events == [] and g.counters["expiry_disagreements"] == 3
    # a late tombstone still deletes it
    log.now_ms = C + R + 4 * 11 * MIN
    log.classic_tombstone("g")
    res = fold(g, log.records[-1:], config=S4)
    assert res.group is None and [e.TYPE for e in res.events] == ["group_deleted"]


def test_broker_tombstone_after_deadline_is_an_expiry_not_a_disagreement() -> None:
    log = Log()
    simple(log)
    log.tick(R + 3 * MIN).offset_tombstone("g", "t", 0)  # the broker swept before the mirror did
    res = fold(None, log.records, config=S4)
    g = res.group
    assert g is not None and g.counters["offsets_expired"] == 1 and g.counters["expiry_disagreements"] == 0
    exp = [e for e in res.events if isinstance(e, ev.OffsetsExpired)]
    assert exp and exp[0].origin == "broker" and exp[0].partitions == ("t:0",)


def test_early_tombstone_of_a_subscribed_topic_is_a_disagreement() -> None:
    log = Log()
    classic_stable(log)
    log.tick(MIN).offset_tombstone("g", "t", 0)  # no admin operation may delete it
    log.offset_tombstone("g", "u", 0)  # OffsetDelete of an unsubscribed topic: fine
    res = fold(None, log.records, config=S4)
    g = res.group
    assert g is not None and g.counters["expiry_disagreements"] == 1 and g.counters["offsets_deleted"] == 1
    dis = [e for e in res.events if isinstance(e, ev.ExpiryDisagreement)]
    assert [(d.reason, d.partitions) for d in dis] == [("early_tombstone", ("t:0",))]


def test_new_commit_clears_pending_expiry() -> None:
    log = Log()
    log.classic("g", 1, [cm("a", ["t"])])
    log.tick(HOUR).commit("g", "u", 0, 1)
    g = fold(None, log.records).group
    assert g is not None
    g, _ = expire(g, C + R, S4)
    assert g is not None and ("u", 0) in g.pending
    log.now_ms = C + R + MIN
    log.commit("g", "u", 0, 2)
    g = fold(g, log.records[-1:], config=S4).group
    assert g is not None and ("u", 0) not in g.pending and g.offsets[("u", 0)][0] == 2


def test_3x_expects_no_group_tombstone_for_generation_zero() -> None:
    log = Log()
    simple(log)
    g = fold(None, log.records).group
    assert g is not None
    g4, _ = expire(g.copy(), C + R, S4)
    assert g4 is not None and g4.exists and GROUP_TOMBSTONE in g4.pending
    # 2.1-3.x: the sweep that tombstones the last offsets deletes the group, with no record of its
    # own -- the mirror deletes it once the offsets' tombstones came
    g3, events = expire(g.copy(), C + R, S3)
    assert g3 is not None and g3.exists and set(g3.pending) == {("t", 0), ("u", 0)}
    assert [e.TYPE for e in events] == ["offsets_expired"]
    log.tick(R + 2 * MIN).offset_tombstone("g", "t", 0)
    log.offset_tombstone("g", "u", 0)
    res = fold(g3, log.records[-2:], config=S3)
    assert res.group is not None and res.group.pending == {}
    g3, events = expire(res.group, log.now_ms, S3)
    assert g3 is None and [(e.TYPE, getattr(e, "reason", None)) for e in events] == [
        ("group_deleted", "expired")
    ]


def test_expire_is_idempotent_for_a_fixed_now() -> None:
    log = Log()
    classic_stable(log)
    g = fold(None, log.records).group
    assert g is not None
    g, first = expire(g, C + R, S4)
    assert g is not None and [e.TYPE for e in first] == ["offsets_expired"]
    again, second = expire(g.copy(), C + R, S4)
    assert again == g and second == []


def test_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="semantics"):
        OffsetConfig(semantics="5.x")
    with pytest.raises(ValueError, match="retention_ms"):
        OffsetConfig(retention_ms=0)
