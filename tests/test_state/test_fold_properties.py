"""hypothesis properties: batch splits, idempotent prefixes, codec round trips, batch == per-record.

Record lists are drawn from a small universe (2 topics x 2 partitions, 3 members, one group) so
that the interesting interleavings -- commits around group tombstones, conversions, static
replacements, tombstones of things never seen, unknown records -- come up often.
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab.records import AnyRecord, Log, cm, columns, tip
from state import events as ev
from state.codec import decode, encode
from state.config import SEMANTICS, OffsetConfig
from state.expiry import all_deadlines, expires_at_ms, next_deadline_ms
from state.fold import fold_columns, step_detail
from state.model import Group
from state.replay import fold

G = "g"
TOPICS = ("t", "u")
MEMBERS = ("m1", "m2", "m3")

op = st.one_of(
    st.tuples(
        st.just("commit"), st.sampled_from(TOPICS), st.integers(0, 1), st.integers(0, 9), st.booleans()
    ),
    st.tuples(st.just("offset_tombstone"), st.sampled_from(TOPICS), st.integers(0, 1), st.booleans()),
    st.tuples(
        st.just("classic"),
        st.integers(0, 6),
        st.lists(st.sampled_from(MEMBERS), unique=True, max_size=3),
        st.booleans(),
    ),
    st.tuples(st.just("classic_tombstone")),
    st.tuples(st.just("k848_member"), st.sampled_from(MEMBERS), st.booleans(), st.booleans()),
    st.tuples(st.just("k848_epoch"), st.one_of(st.none(), st.integers(1, 5))),
    st.tuples(st.just("k848_target_epoch"), st.one_of(st.none(), st.integers(1, 5))),
    st.tuples(
        st.just("k848_current"),
        st.sampled_from(MEMBERS),
        st.one_of(st.none(), st.integers(0, 5)),
        st.integers(0, 2),
    ),
    st.tuples(st.just("unknown")),
    st.tuples(st.just("tick"), st.integers(0, 10**6)),
)


def build(ops: list[tuple[Any, ...]]) -> list[AnyRecord]:
    log = Log(partition=3, start_offset=100)
    for o in ops:
        kind = o[0]
        if kind == "commit":
            _, t, p, off, with_id = o
            log.commit(
                G, t, p, off, topic_id=f"ID-{t}" if with_id else None, metadata="x" if off % 3 == 0 else None
            )
        elif kind == "offset_tombstone":
            _, t, p, legacy = o
            log.offset_tombstone(G, t, p, legacy=legacy)
        elif kind == "classic":
            _, gen, mids, static = o
            members = [
                cm(m, ["t"], {"t": [i]}, instance_id=f"i-{m[-1]}" if static else None)
                for i, m in enumerate(mids)
            ]
            log.classic(G, gen, members)
        elif kind == "classic_tombstone":
            log.classic_tombstone(G)
        elif kind == "k848_member":
            _, m, present, static = o
            log.k848_member(G, m, ["t"] if present else None, instance_id="i-k" if static else None)
        elif kind == "k848_epoch":
            log.k848_epoch(G, o[1])
        elif kind == "k848_target_epoch":
            log.k848_target_epoch(G, o[1])
        elif kind == "k848_current":
            _, m, epoch, state = o
            log.k848_current(G, m, epoch, [tip("ID-t", 0)] if epoch else [], state=state)
        elif kind == "unknown":
            log.unknown()
        elif kind == "tick":
            log.tick(o[1])
    return log.records


def normalise(events: list[ev.Event]) -> tuple[list[ev.Event], Counter[str]]:
    """Discrete events in order; aggregate events summed (they are per fold call by design)."""
    discrete = [e for e in events if not e.AGGREGATE]
    totals: Counter[str] = Counter()
    for e in events:
        if isinstance(e, ev.OffsetsCommitted):
            totals["committed"] += e.count
        elif isinstance(e, ev.OffsetsDeleted):
            totals["deleted"] += e.count
        elif isinstance(e, ev.OffsetsExpired):
            totals[f"expired-{e.origin}"] += e.count
    return discrete, totals


def fold_in_batches(
    records: list[AnyRecord], cuts: list[int], *, batch_path: bool = False
) -> tuple[Group | None, list[ev.Event]]:
    bounds = sorted({0, len(records), *[c % (len(records) + 1) for c in cuts]})
    g: Group | None = None
    events: list[ev.Event] = []
    for lo, hi in itertools.pairwise(bounds):
        batch = records[lo:hi]
        if g is not None:
            g = decode(encode(g))  # what the state store does between micro-batches
        res = fold_columns(g, columns(batch), group_id=G) if batch_path else fold(g, batch, group_id=G)
        g = res.group
        events.extend(res.events)
    return g, events


COMMON = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@COMMON
@given(st.lists(op, max_size=30), st.lists(st.integers(0, 40), max_size=4))
def test_any_split_folds_to_the_same_state_and_events(ops: list[tuple[Any, ...]], cuts: list[int]) -> None:
    records = build(ops)
    whole = fold(None, records, group_id=G)
    split_g, split_events = fold_in_batches(records, cuts)
    assert split_g == whole.group
    assert normalise(split_events) == normalise(whole.events)


@COMMON
@given(st.lists(op, max_size=30), st.integers(0, 40))
def test_replaying_any_prefix_again_changes_nothing(ops: list[tuple[Any, ...]], k: int) -> None:
    records = build(ops)
    res = fold(None, records, group_id=G)
    if res.group is None:
        return  # state was removed: the adapter has no row to replay into
    before = encode(res.group)
    again = fold(res.group, records[: k % (len(records) + 1)], group_id=G)
    assert again.events == []
    assert again.group is not None and encode(again.group) == before


@COMMON
@given(st.lists(op, max_size=30))
def test_codec_round_trips_every_reachable_state(ops: list[tuple[Any, ...]]) -> None:
    records = build(ops)
    g: Group | None = None
    for r in records:  # every intermediate state, not only the last
        g = fold(g, [r], group_id=G).group
        if g is not None:
            assert decode(encode(g)) == g


@COMMON
@given(st.lists(op, max_size=30), st.lists(st.integers(0, 40), max_size=3))
def test_batch_fold_equals_per_record_fold(ops: list[tuple[Any, ...]], cuts: list[int]) -> None:
    records = build(ops)
    whole = fold(None, records, group_id=G)
    one_batch = fold_columns(None, columns(records), group_id=G) if records else whole
    assert one_batch.group == whole.group
    assert one_batch.events == whole.events
    g, events = fold_in_batches(records, cuts, batch_path=True)
    assert g == whole.group
    assert normalise(events) == normalise(whole.events)


@COMMON
@given(
    st.lists(op, max_size=30),
    st.integers(0, 40),
    st.sampled_from([0, 60_000, 3_600_000, 10**7]),
    st.sampled_from(["4.x", "2.1-3.x", "<=2.0"]),
)
def test_step_detail_deadlines_equal_a_fresh_evaluation(
    ops: list[tuple[Any, ...]], cut: int, later_ms: int, semantics: str
) -> None:
    """step_detail evaluates the expiry rules once and hands the figures on (summary, timeout,
    offsets feed): they must be what evaluating the resulting group afresh gives, whatever
    expired, was deleted or is pending at that moment."""
    s = OffsetConfig(retention_ms=3_600_000, confirm_grace_ms=60_000, semantics=semantics)
    records = build(ops)
    k = cut % (len(records) + 1)
    g: Group | None = None
    for part in (records[:k], records[k:]):
        now = max((r.source.timestamp_ms or 0 for r in part), default=0) + later_ms
        res = step_detail(g, columns(part) if part else None, now, group_id=G, config=s)
        if res.group is None:
            assert res.deadlines == {} and res.deadline is None
        else:
            assert res.deadlines == all_deadlines(res.group, s)
            # the inlined loop in all_deadlines = the rules offset by offset (`expires_at_ms`)
            assert res.deadlines == {tp: expires_at_ms(res.group, *tp, s) for tp in res.group.offsets}
            assert res.deadline == next_deadline_ms(res.group, s)
        g = res.group


configs = st.builds(
    OffsetConfig,
    retention_ms=st.integers(1, 10**6),
    semantics=st.sampled_from(SEMANTICS),
    confirm_grace_ms=st.integers(0, 10**6),
)


@COMMON
@given(
    st.lists(op, max_size=30),
    st.lists(st.integers(0, 40), max_size=4),
    configs,
    st.lists(st.integers(0, 10**7), min_size=5, max_size=5),
)
def test_no_two_events_share_a_key(
    ops: list[tuple[Any, ...]], cuts: list[int], config: OffsetConfig, waits: list[int]
) -> None:
    """`state.events.event_key` over any log, cut into any micro-batches, each followed by the
    expiry step at a clock of its own (the events of the mirror's clock: expiries, deletions and
    unconfirmed expiries with no log position)."""
    records = build(ops)
    bounds = sorted({0, len(records), *[c % (len(records) + 1) for c in cuts]})
    g: Group | None = None
    keys: list[tuple[Any, ...]] = []
    now = -1
    for i, (lo, hi) in enumerate(itertools.pairwise(bounds)):
        # each micro-batch runs at a processing time of its own, later than the last batch's (a
        # batch takes far more than a millisecond; a batch run again after a restart is the same
        # batch, whose events are meant to share their keys): two batches at one clock made a
        # group created, expired, created and expired again within one millisecond, whose two
        # mirror-made deletions (no log position, at_ms the clock) then shared a key
        now = max(now + 1, records[hi - 1].source.timestamp_ms) + waits[i % len(waits)]
        stored = None if g is None else decode(encode(g))
        res = step_detail(stored, columns(records[lo:hi]), now, config=config)
        g = res.group
        keys += [ev.event_key(e.to_json()) for e in res.events]
    assert len(keys) == len(set(keys)), Counter(keys).most_common(3)
